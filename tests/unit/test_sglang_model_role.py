"""The sglang_model role through ansible-playbook on localhost against a real local mirror: preflight refuses a bad
entry before anything changes, check mode writes nothing, a second run changes nothing. hf: the role makes the client
venv (real pip, from the tests' cached wheels) and fetches from the stand-in hub; the token is in no -vvv output."""
import json
import os
import subprocess
import sys

from tests.helpers.ansible_run import ANSIBLE, REPO, failure, run_playbook, task_results
from tests.helpers.hf_standin import StandInHub, make_hf_model
from tests.helpers.model_mirror import Mirror, make_model

PLAYBOOK = "tests/playbooks/role_local.yml"


def play(tmp_path, models, check=False):
    return run_playbook(PLAYBOOK, {"test_role": "sglang_model", "sglang_model_models": models,
                                   "sglang_model_dir": str(tmp_path / "models"), "sglang_model_space_margin_mb": 0},
                        check=check)


def test_role_refuses_then_fetches_then_changes_nothing(tmp_path):
    manifest = make_model(tmp_path / "served", {"a.safetensors": os.urandom(5000), "config.json": b"{}"})
    with Mirror(tmp_path / "served", manifest) as mirror:
        good = {"name": "m", "revision": "r1", "source": {"type": "http", "url": mirror.url}}
        rc, report = play(tmp_path, [good, {"name": "d", "revision": "v1", "source": {"type": "peer", "host": "g2"}}])
        assert rc == 2 and "a host of the inventory (g2 is not)" in failure(report)[1]
        assert not (tmp_path / "models").exists() and mirror.log == []
        rc, report = play(tmp_path, [good], check=True)
        assert rc == 0 and not (tmp_path / "models").exists()
        rc, report = play(tmp_path, [good])
        assert rc == 0, failure(report)
        fetched = dict(task_results(report))["Fetch and verify each model revision"]
        assert fetched["changed"] and fetched["results"][0]["transferred_bytes"] == 5002
        facts = dict(task_results(report))["Publish the verified revisions"]["ansible_facts"]
        assert facts["sglang_model_revisions"]["m"]["path"] == str(tmp_path / "models" / "m" / "r1")
        mirror.log.clear()
        rc, report = play(tmp_path, [good])
        assert rc == 0 and not any(r.get("changed") for _n, r in task_results(report)) and mirror.log == []


def test_role_makes_the_hf_client_and_fetches_without_showing_the_token(tmp_path):
    from tests.helpers.wheels import hf_client_requirements, wheelhouse

    token, commit = "hf_role_secret_0d9e3b", "cd" * 20
    (tmp_path / "token").write_text(token + "\n")
    files = make_hf_model()
    house = wheelhouse("hf-client-" + __import__("hashlib").sha256(
        "\n".join(hf_client_requirements()).encode()).hexdigest()[:12], *hf_client_requirements())
    with StandInHub("o/m", files, commit=commit, token=token) as hub:
        extra = {"test_role": "sglang_model", "sglang_model_dir": str(tmp_path / "models"),
                 "sglang_model_hf_venv": str(tmp_path / "hf-client" / "venv"),
                 "sglang_model_space_margin_mb": 0, "sglang_model_hf_python": sys.executable,
                 "sglang_model_hf_pip_args": ["--no-index", "--find-links", house],
                 "sglang_model_models": [{"name": "m", "revision": "main", "source": {
                     "type": "hf", "repo": "o/m", "endpoint": hub.endpoint, "token_file": str(tmp_path / "token")}}]}
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
        proc = subprocess.run([ANSIBLE + "-playbook", PLAYBOOK, "-vvv", "-e", json.dumps(extra)], cwd=REPO, env=env,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert token not in proc.stdout and token not in proc.stderr
        assert (tmp_path / "models" / "m" / commit / "config.json").read_bytes() == files["config.json"]
        assert (tmp_path / "hf-client" / "venv" / "bin" / "python").exists()
        assert hub.token_hits == [] and any(entry[4] == "Bearer " + token for entry in hub.log)
        hub.log.clear()
        rc, report = run_playbook(PLAYBOOK, dict(extra, sglang_model_hf_require_commit=True,
                                                 sglang_model_models=[dict(extra["sglang_model_models"][0],
                                                                           revision=commit)]))
        assert rc == 0 and not any(r.get("changed") for _n, r in task_results(report)), failure(report)
        assert hub.log == []
        rc, report = run_playbook(PLAYBOOK, dict(extra, sglang_model_hf_require_commit=True), check=True)
        assert rc == 2 and "40-hex commit" in failure(report)[1] and hub.log == []
        rc, report = run_playbook(PLAYBOOK, dict(extra, sglang_model_hf_venv=str(tmp_path / "models" / ".hf-client")))
        assert rc == 2 and "the venv outside sglang_model_dir" in failure(report)[1] and hub.log == []
        assert not (tmp_path / "models" / ".hf-client").exists()
