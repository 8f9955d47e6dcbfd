"""model_store (http source) as root against a models tree the service user planted (tests/helpers/planted.py: a
forked child that dropped to ``nobody``): every link, FIFO or foreign folder is refused with a message naming the
path and the rule, nothing outside the tree changes (a decoy tree hashed before and after), and every bad input gets
the module's own message."""
import json
import os

import pytest

from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.model_mirror import Mirror, make_model
from tests.helpers.planted import Home, hang_guard

FILES = {"config.json": b'{"hidden_size": 64}', "model.safetensors": os.urandom(20000), "tok/vocab.json": b"{}"}
PLENTY = lambda path: 10 ** 12  # noqa: E731


@pytest.fixture(params=["service", "root"])
def home(request):
    """The model's folder as the service user left it ("service": theirs, as after renaming root's away), or handed
    back to root after the plant ("root": only what is inside is theirs): each rule is met on its own."""
    planted = Home(adopt=request.param == "root")
    yield planted
    planted.close()


@pytest.fixture
def mirror(tmp_path):
    manifest = make_model(tmp_path / "served", FILES)
    with Mirror(tmp_path / "served", manifest) as server:
        yield server


@pytest.fixture(autouse=True)
def never_hang():
    with hang_guard(120):
        yield


def fetch(home, mirror, revision="r1", **kwargs):
    kwargs.setdefault("free", PLENTY)
    return ms.ensure(home.models, "m", revision, dict({"type": "http", "url": mirror.url}, **kwargs.pop("source", {})),
                     **kwargs)


def refused(home, mirror, *needles, **kwargs):
    """The fetch refused; the message names the planted path and its rule (the model's folder and the owner rule
    when the service user owns it)."""
    with pytest.raises(ModelError) as caught:
        fetch(home, mirror, **kwargs)
    owner = (home.path("m") + " is owned by uid %d" % home.uid, "root writes only into folders")
    msg = str(caught.value)
    assert all(n in msg for n in needles) or (home.foreign("m") and all(n in msg for n in owner)), (needles, msg)
    assert home.decoy_unchanged()
    return str(caught.value)


def plant_link(link, target):
    def action():
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(target, link)
    return action


def test_a_partial_folder_that_is_a_link_is_refused_and_its_target_untouched(home, mirror):
    home.plant(plant_link(home.path("m", ".partial-r1"), home.decoy))
    refused(home, mirror, home.path("m", ".partial-r1"), "symbolic link", "root follows no link")
    assert not os.path.exists(home.path("m", "r1"))


def test_a_state_folder_that_is_a_link_is_refused_and_no_lock_record_or_progress_lands_outside(home, mirror):
    home.plant(plant_link(home.path("m", ".state"), home.decoy))
    refused(home, mirror, home.path("m", ".state"), "symbolic link")
    assert sorted(os.listdir(home.decoy)) == ["config.json", "keys"]


def test_a_model_folder_that_is_a_link_is_refused(home, mirror):
    home.plant(plant_link(home.path("m"), home.decoy))
    with pytest.raises(ModelError, match="models/m is a symbolic link: root follows no link"):
        fetch(home, mirror)
    assert home.decoy_unchanged()


def test_a_link_inside_a_planted_partial_folder_is_never_written_or_chmod_through(home, mirror):
    def action():
        os.makedirs(home.path("m", ".partial-r1"))
        os.symlink(os.path.join(home.decoy, "config.json"), home.path("m", ".partial-r1", "config.json"))
    home.plant(action)
    refused(home, mirror, home.path("m", ".partial-r1") + " is owned by uid %d" % home.uid,
            "root writes only into folders that only root can change")


def test_a_fifo_in_a_planted_partial_folder_neither_hangs_nor_passes(home, mirror):
    def action():
        os.makedirs(home.path("m", ".partial-r1"))
        os.mkfifo(home.path("m", ".partial-r1", "model.safetensors"))
    home.plant(action)
    refused(home, mirror, home.path("m", ".partial-r1") + " is owned by uid %d" % home.uid,
            "root writes only into folders")


def test_a_fifo_in_roots_own_partial_folder_is_refused_before_it_is_opened(home, mirror):
    home.root_model()
    os.makedirs(home.path("m", ".partial-r1"))
    os.mkfifo(home.path("m", ".partial-r1", "model.safetensors"))
    refused(home, mirror, home.path("m", ".partial-r1", "model.safetensors"), "is a FIFO",
            "not a regular file or folder")


def test_a_link_in_roots_own_partial_folder_is_refused_and_its_target_untouched(home, mirror):
    home.root_model()
    os.makedirs(home.path("m", ".partial-r1", "tok"))
    os.symlink(os.path.join(home.decoy, "keys", "id"), home.path("m", ".partial-r1", "tok", "vocab.json"))
    refused(home, mirror, home.path("m", ".partial-r1", "tok", "vocab.json"), "symbolic link")


def test_a_planted_record_folder_is_not_trusted(home, mirror):
    fetch(home, mirror, revision="r0")  # root's own .state exists
    record = json.loads(open(home.path("m", ".state", "r0.json")).read())

    def action():
        os.rename(home.path("m"), home.path("m-old"))
        os.makedirs(home.path("m", ".state"))
        os.makedirs(home.path("m", "r1"))
        with open(home.path("m", ".state", "r1.json"), "w") as handle:
            json.dump(dict(record, revision="r1", path=home.decoy), handle)
    home.plant(action)
    refused(home, mirror, home.path("m", ".state") + " is owned by uid %d" % home.uid)


def test_a_planted_revision_folder_without_a_record_is_not_recorded_as_verified(home, mirror):
    def action():
        os.makedirs(home.path("m"))
        make_model(home.path("m", "r1"), FILES)  # the right bytes, but the service user can change them later
    home.plant(action)
    refused(home, mirror, home.path("m", "r1") + " is owned by uid %d" % home.uid)
    assert not os.path.exists(home.path("m", ".state", "r1.json"))


def test_a_revision_folder_that_is_a_link_is_refused(home, mirror):
    home.plant(plant_link(home.path("m", "r1"), home.decoy))
    refused(home, mirror, home.path("m", "r1"), "symbolic link")


@pytest.mark.parametrize("revision", ["current", "CURRENT", "r1.progress", "r1.lock", "r1.json", "..", ".", ".r1",
                                      "./r1", "r1/", "r1\n", "a/b", ""])
def test_reserved_or_unplain_revisions_are_refused(home, mirror, revision):
    with pytest.raises(ModelError) as caught:
        fetch(home, mirror, revision=revision)
    assert "revision %r" % revision in str(caught.value) or "got %r" % revision in str(caught.value)
    assert "must be" in str(caught.value) or "reserved" in str(caught.value)
    assert os.listdir(home.models) == []


def test_the_fetch_still_works_in_a_clean_tree_and_the_revision_is_roots(home, mirror):
    home.root_model()
    result = fetch(home, mirror)
    info = os.lstat(result["model_path"])
    assert info.st_uid == 0 and not info.st_mode & 0o022
    assert home.decoy_unchanged()


def test_the_fetch_module_answers_a_planted_link_with_its_own_message(home, mirror):
    from tests.helpers.ansible_run import run_module  # pylint: disable=import-outside-toplevel

    home.plant(plant_link(home.path("m", ".partial-r1"), home.decoy))
    result = run_module("sglang_model_fetch", {"name": "m", "revision": "r1", "models_dir": home.models,
                                               "space_margin_mb": 0, "source": {"type": "http", "url": mirror.url}})
    assert result.get("failed") and result["changed"] is False, result
    assert "Traceback" not in json.dumps(result) and "module_stderr" not in result, result
    assert (home.path("m", ".partial-r1") + " is a symbolic link" in result["msg"]
            or home.path("m") + " is owned by uid %d" % home.uid in result["msg"]), result["msg"]
    assert home.decoy_unchanged()


@pytest.mark.parametrize("name", ["a\ud800b", "tok/\udcff", "x\n"])
def test_the_fetch_module_answers_a_manifest_name_that_is_no_name_with_its_own_message(home, mirror, name):
    from tests.helpers.ansible_run import run_module  # pylint: disable=import-outside-toplevel

    mirror.manifest = mirror.manifest + [{"name": name, "size": 0, "sha256": "0" * 64}]
    home.root_model()
    result = run_module("sglang_model_fetch", {"name": "m", "revision": "r1", "models_dir": home.models,
                                               "space_margin_mb": 0, "source": {"type": "http", "url": mirror.url}})
    assert result.get("failed") and "Refusing to deserialize" not in result["msg"], result
    assert "surrogate" in result["msg"] or "control characters" in result["msg"], result["msg"]
    assert sorted(os.listdir(home.path("m"))) == []
