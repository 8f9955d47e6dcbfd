"""playbooks/plays/converge_record.yml as deploy.yml runs it before the benchmark gate, through real ansible-playbook
on a local host named into the play's group: the record holds every capability but the gate's and the metrics'
(so a run that fails at the gate keeps what converged, and the next one goes through the gate again); with the fast
path off (deploy_fast_path=false), nothing is written there (the last record stays until a run ends well)."""
import json

import yaml

from tests.helpers.ansible_run import run_playbook, task_results

PLAY = "playbooks/plays/converge_record.yml"


def record_before_gate(tmp_path, groups=(), **extra):
    """The play as deploy.yml runs it before the gate (after it with __deploy_record_before_gate false), for gpu-a,
    also a member of `groups`."""
    inventory = tmp_path / "hosts.yml"
    host = {"gpu-a": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}
    inventory.write_text(yaml.safe_dump(dict({"blackwell": {"hosts": host}},
                                             **{group: {"hosts": {"gpu-a": {}}} for group in groups})))
    record = tmp_path / "converged.json"
    rc, report = run_playbook(PLAY, dict({"__deploy_record_before_gate": True, "sglang_model_revisions": {},
                                          "sglang_layout_converge_record": str(record)}, **extra),
                              inventory=str(inventory))
    return rc, dict(task_results(report, "gpu-a")), record


def test_the_record_before_the_gate_leaves_out_the_gate_and_the_metrics(tmp_path):
    rc, ran, record = record_before_gate(tmp_path)
    assert rc == 0, ran
    assert ran["Publish what the deploy decided as metrics (node_exporter's textfile)"].get("skipped")
    capabilities = json.loads(record.read_text())["capabilities"]
    assert "benchmark" not in capabilities and "metrics" not in capabilities
    assert {"install", "model", "code", "server", "nccl", "preflight"} <= set(capabilities)


def test_with_the_fast_path_off_no_record_is_written_before_the_gate(tmp_path):
    rc, ran, record = record_before_gate(tmp_path, deploy_fast_path=False)
    assert rc == 0, ran
    assert ran["Record"].get("skipped") and not record.exists()


def test_after_the_gate_a_host_that_did_not_pass_publishes_its_metrics_and_is_not_recorded(tmp_path):
    # Its textfile must show the failed verdict and the rollback (the alerts read them); its record stays the one
    # made before the gate, so the next run sends it through the gate again. No textfile folder: nothing written.
    rc, ran, record = record_before_gate(tmp_path, groups=["sglang_benchmark_not_passed"],
                                         __deploy_record_before_gate=False, sglang_metrics_textfile_dir="")
    assert rc == 0, ran
    assert not ran["Publish what the deploy decided as metrics (node_exporter's textfile)"].get("skipped")
    assert ran["Record"].get("skipped") and not record.exists()
