"""playbooks/deploy.yml refuses a bad server setting before any role runs: sglang_server's `settings` entry point is
its first check, so a host is not given a new venv, a patched SGLang or NCCL settings for a server that would be
refused later. Real ansible-playbook on a local host named into the play's group; only refused settings are run
here (a good one would deploy onto this machine)."""
import pytest
import yaml

from tests.helpers.ansible_run import run_playbook, task_results


@pytest.mark.parametrize("variables, words", [
    ({"sglang_server_served_model_name": "kimi\nUser=root"}, "sglang_server_served_model_name"),
    ({"sglang_server_multinode_group": "server_typo"}, "server_typo"),
    ({"sglang_server_host": "0.0.0.0"}, "sglang_server_allow_all_interfaces"),
    # other spellings of every interface (filter_plugins/sglang_url.py's sglang_server_binds_all)
    ({"sglang_server_host": "0"}, "sglang_server_allow_all_interfaces"),
    ({"sglang_server_host": "0:0:0:0:0:0:0:0"}, "sglang_server_allow_all_interfaces"),
    ({"sglang_server_host": "000.0.0.0"}, "sglang_server_allow_all_interfaces"),
    ({"sglang_server_host": "::FFFF:0.0.0.0"}, "sglang_server_allow_all_interfaces"),
])
def test_a_bad_server_setting_stops_the_deploy_before_any_role_runs(tmp_path, variables, words):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"blackwell": {"hosts": {"gpu-a": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}))
    rc, report = run_playbook("deploy.yml", dict(variables, sglang_server_model_path="/srv/models/m"),
                              inventory=str(inventory))
    assert rc != 0
    ran = task_results(report, "gpu-a")
    failed = [(name, result) for name, result in ran if result.get("failed")]
    assert len(failed) == 1 and words in failed[0][1]["msg"], failed
    assert not any(result.get("changed") for _name, result in ran)
    roles = {play_task["task"]["name"].split(" : ")[0] for play in report["plays"] for play_task in play["tasks"]
             if " : " in play_task["task"]["name"]}
    # The fast path's comparison reads only (no change above); no gpu_preflight, sglang_install, fusion_patch...
    assert roles <= {"sglang_server", "sglang_layout", "sglang_fast_path"}, roles
