"""sglang_model_current through real Ansible (ad-hoc, local connection): the current link points at a verified revision
only, check mode writes nothing, diff shows the switch, a second run changes nothing, bad input gets its own message."""
import json
import os

from tests.helpers.ansible_run import module_doc, run_module
from tests.helpers.model_mirror import Mirror, make_model
from tests.unit.test_model_fetch_module import FILES


def fetch(tmp_path, revision):
    manifest = make_model(tmp_path / ("served-" + revision), FILES)
    with Mirror(tmp_path / ("served-" + revision), manifest) as mirror:
        fetched = run_module("sglang_model_fetch", {"name": "m", "revision": revision,
                                                    "models_dir": str(tmp_path / "models"),
                                                    "source": {"type": "http", "url": mirror.url},
                                                    "space_margin_mb": 0})
    assert not fetched.get("failed"), fetched
    return fetched["model"]


def current(tmp_path, revision, check=False):
    return run_module("sglang_model_current", {"models_dir": str(tmp_path / "models"), "name": "m",
                                               "revision": revision}, check=check, diff=True)


def test_the_link_follows_the_verified_revisions_and_names_what_it_held(tmp_path):
    link = tmp_path / "models" / "m" / "current"
    refused = current(tmp_path, "r1")
    assert refused.get("failed") and "not a verified revision" in refused["msg"] and not os.path.lexists(link)
    model = fetch(tmp_path, "r1")
    assert model["current"] == str(link) and model["current_target"] == "r1"
    dry = current(tmp_path, "r1", check=True)
    assert dry["changed"] and dry["diff"]["after"] == "r1\n" and not os.path.lexists(link)
    first = current(tmp_path, "r1")
    assert first["changed"] and first["previous"] is None and os.readlink(str(link)) == "r1"
    assert current(tmp_path, "r1")["changed"] is False
    fetch(tmp_path, "r2")
    second = current(tmp_path, "r2")
    assert second["changed"] and second["previous"] == "r1" and second["diff"]["before"] == "r1\n"
    assert os.readlink(str(link)) == "r2" and sorted(os.listdir(str(link))) == sorted(FILES)


def test_bad_input_gets_its_own_message_and_changes_nothing(tmp_path):
    for extra, needle in (({"name": "../etc"}, "name must be"), ({"revision": "a b"}, "revision must be"),
                          ({"models_dir": "models"}, "absolute path")):
        result = run_module("sglang_model_current", dict({"models_dir": str(tmp_path), "name": "m",
                                                          "revision": "r1"}, **extra))
        assert result.get("failed") and needle in result["msg"], result
        assert "Traceback" not in json.dumps(result) and os.listdir(str(tmp_path)) == []


def test_documentation_renders_and_matches_the_arguments():
    info = module_doc("sglang_model_current")
    assert set(info["doc"]["options"]) == {"models_dir", "name", "revision"}
    assert {"link", "previous", "target"} <= set(info["return"])
