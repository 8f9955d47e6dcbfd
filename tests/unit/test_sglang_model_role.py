"""The sglang_model role through ansible-playbook on localhost against a real local mirror: preflight refuses a bad
entry before anything changes, check mode writes nothing, a second run changes nothing."""
import os

from tests.helpers.ansible_run import failure, run_playbook, task_results
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
        rc, report = play(tmp_path, [good, {"name": "d", "revision": "v1", "source": {"type": "hf", "repo": "o/d"}}])
        assert rc == 2 and "hf is not yet supported" in failure(report)[1]
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
