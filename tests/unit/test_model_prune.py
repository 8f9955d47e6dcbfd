"""module_utils/model_prune.py and its module: the revision current points at and the kept ones stay, every other
revision the store recorded goes with its record, a path source's own folder never goes."""
import json
import os

import pytest

from ansible.module_utils import model_prune as mp
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.ansible_run import module_doc, run_module
from tests.helpers.model_mirror import Mirror, make_model

FILES = {"config.json": b"{}", "model.safetensors": b"w" * 100}


@pytest.fixture
def store(tmp_path):
    """r1, r2 and r3 fetched from a mirror; r4 staged elsewhere (a path source); a stopped fetch of r5."""
    models = str(tmp_path / "models")
    for revision in ("r1", "r2", "r3"):
        manifest = make_model(tmp_path / ("served-" + revision), FILES)
        with Mirror(tmp_path / ("served-" + revision), manifest) as mirror:
            ms.ensure(models, "m", revision, {"type": "http", "url": mirror.url})
    shared = tmp_path / "shared" / "m-r4"
    (tmp_path / "r4.json").write_text(json.dumps({"files": make_model(shared, FILES)}))
    ms.ensure(models, "m", "r4", {"type": "path", "path": str(shared), "manifest": str(tmp_path / "r4.json")})
    os.makedirs(ms.partial_dir(models, "m", "r5"))
    return models


def test_the_running_and_the_kept_revisions_stay_and_the_rest_goes(store, tmp_path):
    ms.switch_current(store, "m", "r2")
    assert mp.prune(store, "m", ["r3"], check_mode=True) == mp.plan(store, "m", ["r3"])
    assert os.path.isdir(ms.revision_dir(store, "m", "r1"))
    removed = mp.prune(store, "m", ["r3"])
    assert removed[:2] == [ms.revision_dir(store, "m", "r1"), ms.partial_dir(store, "m", "r5")]
    assert sorted(os.listdir(os.path.join(store, "m"))) == [".state", "current", "r2", "r3"]
    assert sorted(os.listdir(os.path.join(store, "m", ".state"))) == [".lock", "r2.json", "r2.progress.json",
                                                                       "r3.json", "r3.progress.json"]
    assert os.listdir(str(tmp_path / "shared" / "m-r4")) != [] and mp.prune(store, "m", ["r3"]) == []


def test_a_path_sources_folder_is_kept_while_current_points_at_it(store):
    ms.switch_current(store, "m", "r4")
    assert mp.current_revision(store, "m") == "r4"
    mp.prune(store, "m", [])
    assert sorted(os.listdir(os.path.join(store, "m"))) == [".state", "current"]
    assert sorted(os.listdir(os.path.join(store, "m", ".state"))) == [".lock", "r4.json"]


def test_bad_input_is_refused_before_anything_goes(store):
    for args, needle in (((store, "m", ["../r1"]), "keep must be"), (("models", "m", []), "absolute path")):
        with pytest.raises(ModelError, match=needle):
            mp.prune(*args)
    assert os.path.isdir(ms.revision_dir(store, "m", "r1"))


def test_the_module_in_check_then_real_mode_then_nothing(store):
    ms.switch_current(store, "m", "r3")
    args = {"models_dir": store, "name": "m", "keep": ["r3"]}
    dry = run_module("sglang_model_prune", args, check=True, diff=True)
    assert dry["changed"] and ms.revision_dir(store, "m", "r1") in dry["diff"]["before"]
    assert os.path.isdir(ms.revision_dir(store, "m", "r1"))
    real = run_module("sglang_model_prune", args)
    assert real["removed"] == dry["removed"] and not os.path.exists(ms.revision_dir(store, "m", "r1"))
    assert run_module("sglang_model_prune", args)["changed"] is False
    refused = run_module("sglang_model_prune", dict(args, name="a/b"))
    assert refused.get("failed") and "name must be" in refused["msg"] and "Traceback" not in json.dumps(refused)
    assert set(module_doc("sglang_model_prune")["doc"]["options"]) == {"models_dir", "name", "keep"}
