"""The three injections issue 35 found, through the roles: a derived or layout value holding a line break is refused
where the file is written, naming the variable, and nothing is written (tests/unit/test_written_values.py proves the
same for every variable of every written file, in-process)."""
import os

from tests.helpers.ansible_run import failure, run_playbook

PLAYBOOK = "tests/playbooks/role_tasks_local.yml"
INJECT = "\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'"


def tree(*roots):
    found = {}
    for root in roots:
        for directory, _dirs, files in os.walk(str(root)):
            for name in files:
                path = os.path.join(directory, name)
                with open(path, "rb") as handle:
                    found[path] = handle.read()
    return found


def refused(role, tasks, variables, *watched):
    before = tree(*watched)
    rc, report = run_playbook(PLAYBOOK, dict(variables, test_role=role, test_tasks=tasks))
    task, msg = failure(report)
    assert rc != 0 and "Traceback" not in msg, (task, msg)
    assert tree(*watched) == before
    return task, msg


def test_a_layout_path_on_execstart_is_refused_where_the_unit_is_written(tmp_path):
    units = tmp_path / "units"
    units.mkdir()
    task, msg = refused("sglang_server", "unit", {
        "sglang_layout_unit_dir": str(units), "sglang_server_render_only": True,
        "sglang_server_model_path": "/srv/models/model", "sglang_server_api_key_file": "/etc/sglang/key",
        "sglang_server_args": ["--model-path", "/srv/models/model"], "__sglang_server_fused": False,
        "sglang_layout_api_key_options": "/etc/sglang/api-key.yaml" + INJECT}, units)
    assert task == "Check every value the unit holds, where it is written", (task, msg)
    assert "sglang_layout_api_key_options holds a newline" in msg, msg
    assert not (units / "sglang.service").exists()


def test_a_layout_path_in_the_runtime_environment_file_is_refused_where_it_is_written(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    task, msg = refused("sglang_install", "environment", {
        "sglang_layout_env_dir": str(etc),
        "sglang_layout_flashinfer_workspace": "/var/lib/sglang/flashinfer\nLD_PRELOAD=/tmp/evil.so"}, etc)
    assert task == "Check every value the runtime environment file holds, where it is written", (task, msg)
    assert "__sglang_install_runtime_environment (values)" in msg and "holds a newline" in msg, msg
    assert not (etc / "runtime.env").exists()


def test_a_drift_setting_in_the_scripts_comment_is_refused_before_anything_changes(tmp_path):
    task, msg = refused("drift_schedule", "install", {
        "drift_schedule_state_dir": str(tmp_path / "state"), "drift_schedule_inventory": str(tmp_path / "hosts.yml"),
        "drift_schedule_report_module": "gpufleet.sglang.sglang_drift_report\ntouch /tmp/pwned",
        "drift_schedule_prom_file": ""}, tmp_path, "/usr/local/libexec", "/etc/systemd/system")
    assert task == "Check every value the check script and its units hold, where they are written", (task, msg)
    assert "drift_schedule_report_module holds a newline" in msg, msg
    assert not (tmp_path / "state").exists()


def test_a_drift_secret_is_not_shown_when_refused(tmp_path):
    _task, msg = refused("drift_schedule", "install", {
        "drift_schedule_state_dir": str(tmp_path / "state"), "drift_schedule_inventory": str(tmp_path / "hosts.yml"),
        "drift_schedule_environment": {"HTTPS_PROXY": "http://u:s3cr3t@proxy:3128\nrm -rf /"},
        "drift_schedule_prom_file": ""}, tmp_path)
    assert "drift_schedule_environment (values)[0] holds a newline" in msg and "not shown" in msg, msg
    assert "s3cr3t" not in msg
