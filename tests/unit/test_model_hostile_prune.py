"""model_prune and switch_current as root against what the service user planted (tests/helpers/planted.py): prune
never deletes the revision current points at however it is spelled, never removes through a link, never trusts a
record named as no revision; the current link is never switched through a link. Nothing outside the tree changes
(a decoy tree hashed before and after); the modules answer with their own message."""
import json
import os

import pytest

from ansible.module_utils import model_prune as mp
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.ansible_run import run_module
from tests.helpers.model_mirror import Mirror, make_model
from tests.helpers.planted import Home

FILES = {"config.json": b"{}", "model.safetensors": b"w" * 100}


@pytest.fixture
def home(tmp_path):
    """r1, r2 and r3 fetched by root into the service user's models folder."""
    planted = Home()
    for revision in ("r1", "r2", "r3"):
        manifest = make_model(tmp_path / ("served-" + revision), FILES)
        with Mirror(tmp_path / ("served-" + revision), manifest) as mirror:
            ms.ensure(planted.models, "m", revision, {"type": "http", "url": mirror.url}, free=lambda path: 10 ** 12)
    yield planted
    planted.close()


def point_current(home, target):
    os.symlink(target, home.path("m", ".current-test"))
    os.rename(home.path("m", ".current-test"), home.path("m", "current"))


@pytest.mark.parametrize("spelling", ["r2", "./r2", "r2/", "../m/r2", "r2/.", None])
def test_the_revision_current_points_at_stays_however_it_is_spelled(home, spelling):
    point_current(home, spelling or home.path("m", "r2"))
    removed = mp.prune(home.models, "m", ["r3"])
    assert os.path.isdir(home.path("m", "r2")) and os.path.isdir(home.path("m", "r3"))
    assert home.path("m", "r1") in removed and not os.path.exists(home.path("m", "r1"))
    assert home.decoy_unchanged()


def test_current_pointing_at_something_unknown_prunes_nothing(home):
    point_current(home, home.decoy)
    with pytest.raises(ModelError, match="no revision this store recorded: nothing is pruned"):
        mp.prune(home.models, "m", [])
    assert sorted(os.listdir(home.path("m"))) == [".state", "current", "r1", "r2", "r3"]


def test_a_revision_folder_replaced_by_a_link_is_refused_never_removed_through(home):
    os.rename(home.path("m", "r1"), home.path("m", "r1-moved"))
    os.symlink(home.decoy, home.path("m", "r1"))
    point_current(home, "r2")
    with pytest.raises(ModelError, match="m/r1 is a symbolic link: root follows no link"):
        mp.prune(home.models, "m", [])
    assert home.decoy_unchanged() and os.path.isdir(home.path("m", "r3"))


def test_a_partial_folder_that_is_a_link_is_refused(home):
    os.symlink(home.decoy, home.path("m", ".partial-r9"))
    point_current(home, "r2")
    with pytest.raises(ModelError, match=r"m/\.partial-r9 is a symbolic link"):
        mp.prune(home.models, "m", [])
    assert home.decoy_unchanged()


def test_a_record_whose_revision_is_no_revision_is_refused_or_ignored(home):
    record = json.loads(open(home.path("m", ".state", "r1.json")).read())
    for revision in ("..", "current"):
        with open(home.path("m", ".state", revision + ".json"), "w") as handle:
            json.dump(dict(record, revision=revision), handle)
    point_current(home, "r2")
    with pytest.raises(ModelError, match=r"current\.json: the record's revision 'current' is reserved"):
        mp.prune(home.models, "m", [])
    os.unlink(home.path("m", ".state", "current.json"))
    removed = mp.prune(home.models, "m", [])  # '...json' starts with '.': not a record of this store
    assert all(os.path.dirname(path) in (home.path("m"), home.path("m", ".state")) for path in removed)
    assert os.path.isdir(home.path("m", "r2")) and home.decoy_unchanged()


def test_a_link_inside_a_revision_is_removed_itself_not_its_target(home):
    point_current(home, "r2")
    os.symlink(home.decoy, home.path("m", "r1", "escape"))
    mp.prune(home.models, "m", [])
    assert not os.path.lexists(home.path("m", "r1")) and home.decoy_unchanged()


def test_a_state_folder_planted_by_the_service_user_is_refused(home):
    def action():
        os.makedirs(home.path("n", ".state"))
        with open(home.path("n", ".state", "r1.json"), "w") as handle:
            handle.write("{}")
    home.plant(action)
    with pytest.raises(ModelError, match="models/n is owned by uid %d" % home.uid):
        ms.read_record(home.models, "n", "r1")
    with pytest.raises(ModelError, match="models/n is owned by uid %d" % home.uid):
        mp.prune(home.models, "n", [])
    assert home.decoy_unchanged()


def test_the_prune_module_answers_with_its_own_message(home):
    os.symlink(home.decoy, home.path("m", ".partial-r9"))
    result = run_module("sglang_model_prune", {"models_dir": home.models, "name": "m", "keep": ["r2"]})
    assert result.get("failed") and "Traceback" not in json.dumps(result), result
    assert ".partial-r9 is a symbolic link" in result["msg"]
    result = run_module("sglang_model_prune", {"models_dir": home.models, "name": "m", "keep": ["r2\n"]})
    assert result.get("failed") and "keep must be" in result["msg"], result


def test_switch_current_never_goes_through_a_link(home):
    os.rename(home.path("m"), home.path("m-real"))
    os.symlink(home.decoy, home.path("m"))
    with pytest.raises(ModelError, match="models/m is a symbolic link"):
        ms.switch_current(home.models, "m", "r1")
    assert home.decoy_unchanged()


def test_switch_current_refuses_a_revision_folder_that_is_a_link(home):
    os.rename(home.path("m", "r1"), home.path("m", "r1-moved"))
    os.symlink(home.decoy, home.path("m", "r1"))
    with pytest.raises(ModelError, match="m/r1 is a symbolic link"):
        ms.switch_current(home.models, "m", "r1")
    assert not os.path.lexists(home.path("m", "current"))


def test_the_current_module_refuses_a_reserved_revision(home):
    result = run_module("sglang_model_current", {"models_dir": home.models, "name": "m", "revision": "current"})
    assert result.get("failed") and "is reserved" in result["msg"] and "Traceback" not in json.dumps(result)


def test_names_that_are_not_utf8_get_the_modules_own_message(home):
    """A folder or record whose name is not UTF-8 (a lone surrogate once decoded) never breaks the result."""
    os.mkdir(os.path.join(home.models.encode(), b"m", b".partial-\xff"))
    result = run_module("sglang_model_prune", {"models_dir": home.models, "name": "m", "keep": ["r1", "r2", "r3"]})
    assert not result.get("failed") and result["removed"] == [], result  # not a folder this store made: it stays
    assert os.path.isdir(os.path.join(home.models.encode(), b"m", b".partial-\xff"))
    with open(os.path.join(home.models.encode(), b"m", b".state", b"\xff.json"), "w") as handle:
        handle.write("{}")
    result = run_module("sglang_model_prune", {"models_dir": home.models, "name": "m", "keep": []})
    assert result.get("failed") and "Refusing to deserialize" not in result["msg"], result
    assert "\\udcff.json: the record's revision must be" in result["msg"] and "got '\\udcff'" in result["msg"]
    assert os.path.isdir(home.path("m", "r1"))
