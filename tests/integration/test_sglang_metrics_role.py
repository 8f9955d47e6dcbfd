"""The sglang_metrics role on this machine, against a host layout in a temporary folder: the textfile written once
(promtool-clean), a second run changed nothing, a dry run skipped, bad settings refused before anything is written."""
import os

from tests.helpers.ansible_run import failure, run_playbook, task_results
from tests.helpers.promtool import check_metrics
from tests.integration.test_deploy_metrics_module import host_files, records

PLAYBOOK = "tests/playbooks/role_local.yml"


def role_vars(tmp_path, **overrides):
    files = host_files(tmp_path)
    recorded = records(tmp_path)
    home = os.path.dirname(recorded["gate_verdict_file"])
    variables = {"test_role": "sglang_metrics",
                 "sglang_layout_home": home, "sglang_layout_state_dir": home,
                 "sglang_layout_root": str(tmp_path / "opt"),
                 "sglang_metrics_textfile_dir": str(tmp_path / "node-exporter"),
                 "sglang_metrics_server_endpoint": {"unit_file": files["unit_file"],
                                                    "model_path": files["model_path"]},
                 "sglang_metrics_allreduce_path": "fusion"}
    variables.update(overrides)
    return variables


def changed(report, name):
    return [result.get("changed") for task, result in task_results(report) if task == name]


def test_the_role_writes_the_textfile_once_and_a_second_run_changes_nothing(tmp_path):
    variables = role_vars(tmp_path)
    rc, report = run_playbook(PLAYBOOK, variables)
    assert rc == 0, failure(report)
    assert changed(report, "Write what the deploy decided") == [True]
    assert changed(report, "Make the textfile folder where there is none") == [True]
    textfile = tmp_path / "node-exporter" / "sglang_deploy.prom"
    text = textfile.read_text()
    assert check_metrics(text) == (0, "")
    assert 'sglang_deploy_allreduce_path_info{path="fusion"} 1' in text.splitlines()
    assert "sglang_deploy_fused 1" in text.splitlines()

    rc, report = run_playbook(PLAYBOOK, variables)
    assert rc == 0, failure(report)
    assert report["stats"]["localhost"]["changed"] == 0
    assert textfile.read_text() == text


def test_a_dry_run_writes_nothing(tmp_path):
    rc, report = run_playbook(PLAYBOOK, role_vars(tmp_path), check=True)
    assert rc == 0, failure(report)
    assert report["stats"]["localhost"]["changed"] == 0
    assert not (tmp_path / "node-exporter").exists()


def test_bad_settings_are_refused_before_anything_is_written(tmp_path):
    variables = role_vars(tmp_path)
    for bad in ({"sglang_metrics_textfile_dir": "relative/dir"}, {"sglang_metrics_server_endpoint": {}},
                {"sglang_metrics_allreduce_path": "fusion\nx"}):
        rc, report = run_playbook(PLAYBOOK, dict(variables, **bad))
        assert rc != 0
        assert failure(report)[0] == "Check the metrics settings before anything is written", bad
    assert not (tmp_path / "node-exporter").exists()
