"""sglang_model_fetch through real Ansible (ad-hoc, local connection) against a real local HTTP mirror: its own
message on bad input (no traceback, nothing written), check and diff mode, a second run that changes nothing."""
import json
import os

import pytest

from tests.helpers.ansible_run import module_doc, run_module
from tests.helpers.model_mirror import Mirror, make_model
from tests.integration.test_module_refusals import tree

FILES = {"config.json": b'{"hidden_size": 64}', "model.safetensors": os.urandom(70000)}


def args(tmp_path, source, **extra):
    return dict({"name": "m", "revision": "r1", "models_dir": str(tmp_path / "models"), "source": source,
                 "space_margin_mb": 0}, **extra)


def refused(tmp_path, module_args, *needles):
    before = tree(tmp_path)
    result = run_module("sglang_model_fetch", module_args)
    assert result.get("failed") and result["changed"] is False, result
    assert "module_stderr" not in result and "Traceback" not in json.dumps(result), result
    for needle in needles:
        assert needle in result["msg"], (needle, result["msg"])
    assert tree(tmp_path) == before
    return result


@pytest.mark.parametrize("source,extra,needles", [
    ({"type": "hf", "repo": "o/m"}, {"revision": "a" * 40}, ["hf client's Python", "sglang_model_hf_venv"]),
    ({"type": "hf", "repo": "o/m"}, {"revision": "main", "hf_require_commit": True}, ["40-hex commit"]),
    ({"type": "peer", "host": "gpu2"}, {}, ["needs peer_transport"]),
    ({"type": "peer", "host": "gpu2"}, {"peer_transport": {"address": "gpu2", "user": "u"}},
     ["known_hosts (or host_keys) is required"]),
    ({"type": "http"}, {}, ["needs url"]),
    ({"type": "http", "url": "http://127.0.0.1:9"}, {"name": "../etc"}, ["name must be"]),
    ({"type": "http", "url": "http://127.0.0.1:9"}, {"space_margin_mb": -1}, ["space_margin_mb must be 0 or more"]),
    ({"type": "http", "url": "http://127.0.0.1:9"}, {"models_dir": "models"}, ["absolute path"]),
    ({"type": "http", "url": "http://127.0.0.1:9/"}, {}, ["manifest.json failed"]),
    ({"type": "path", "path": "/nonexistent", "manifest": "/nonexistent.json"}, {}, ["cannot read the manifest"]),
])
def test_bad_input_gets_its_own_message(tmp_path, source, extra, needles):
    refused(tmp_path, args(tmp_path, source, **extra), *needles)


def test_check_mode_then_fetch_then_nothing(tmp_path):
    manifest = make_model(tmp_path / "served", FILES)
    with Mirror(tmp_path / "served", manifest) as mirror:
        source = {"type": "http", "url": mirror.url}
        dry = run_module("sglang_model_fetch", args(tmp_path, source), check=True, diff=True)
        assert dry["changed"] and not dry.get("failed"), dry
        assert dry["would_fetch_bytes"] == 70000 + len(FILES["config.json"]) and dry["diff"]["before"] == ""
        assert not (tmp_path / "models").exists()
        real = run_module("sglang_model_fetch", args(tmp_path, source))
        assert real["changed"] and real["transferred_bytes"] == dry["would_fetch_bytes"], real
        assert os.path.isfile(real["progress_file"])
        mirror.log.clear()
        again = run_module("sglang_model_fetch", args(tmp_path, source), check=True, diff=True)
        assert again["changed"] is False and again["transferred_bytes"] == 0 and again["hashed_bytes"] == 0
        assert mirror.log == []


def test_full_disk_and_corruption_fail_cleanly(tmp_path):
    manifest = make_model(tmp_path / "served", FILES)
    with Mirror(tmp_path / "served", manifest) as mirror:
        source = {"type": "http", "url": mirror.url}
        refused(tmp_path, args(tmp_path, source, space_margin_mb=10 ** 9), "not enough free space", "margin")
        data = bytearray(FILES["model.safetensors"])
        data[100] ^= 1
        open(os.path.join(mirror.root, "model.safetensors"), "wb").write(bytes(data))
        result = run_module("sglang_model_fetch", args(tmp_path, source))
        assert result.get("failed") and "model.safetensors from" in result["msg"] and "sha256" in result["msg"]
        assert "Traceback" not in json.dumps(result)
        assert not (tmp_path / "models" / "m" / "r1").exists()


def test_documentation_renders_and_matches_the_arguments():
    info = module_doc("sglang_model_fetch")
    assert set(info["doc"]["options"]) == {"name", "revision", "models_dir", "source", "verify", "space_margin_mb",
                                           "timeout", "retries", "hf_python", "hf_require_commit",
                                           "peer_transport", "peer_probe", "file_deadline", "fetch_deadline"}
    assert set(info["doc"]["options"]["source"]["suboptions"]["type"]["choices"]) == {"path", "http", "hf", "peer"}
    assert "manifest_sha256" in info["return"]


def test_hf_through_ansible_check_then_fetch_then_nothing_and_no_token_shown(tmp_path):
    """The module as Ansible runs it (its bundle carries hf_client.py to the child) with the role's pinned client
    against the stand-in hub (tests/helpers/hf_standin.py)."""
    from tests.helpers.hf_standin import StandInHub, make_hf_model
    from tests.helpers.wheels import hf_client_python

    token, commit = "hf_module_secret_77c1", "ab" * 20
    (tmp_path / "token").write_text(token + "\n")
    files = make_hf_model()
    with StandInHub("o/m", files, commit=commit, token=token) as hub:
        module_args = args(tmp_path, {"type": "hf", "repo": "o/m", "endpoint": hub.endpoint,
                                      "token_file": str(tmp_path / "token")},
                           revision="main", hf_python=hf_client_python())
        dry = run_module("sglang_model_fetch", module_args, check=True, diff=True)
        assert dry["changed"] and dry["would_fetch_bytes"] == sum(map(len, files.values())), dry
        assert not (tmp_path / "models").exists()
        real = run_module("sglang_model_fetch", module_args, diff=True)
        assert real["changed"] and real["model"]["revision"] == commit, real
        assert real["model"]["path"] == str(tmp_path / "models" / "m" / commit) and real["diff"]["before"] == ""
        again = run_module("sglang_model_fetch", dict(module_args, revision=commit))
        assert again["changed"] is False and again["transferred_bytes"] == 0
        assert hub.token_hits == []
        for result in (dry, real, again):
            assert token not in json.dumps(result)
