"""playbooks/drift_check.yml from a checkout (the installed collection's gpufleet.sglang.drift_check is covered by
tests/integration/test_collection_install.py): the dry run of a drift playbook, judged by the sglang_drift_report
module by its short name, in one command, with the checkout's ansible.cfg."""
import json
import sys

import yaml

from tests.helpers.ansible_run import run_playbook, task_results

STAND_IN = """\
- name: A stand-in for the drift playbook
  hosts: "{{ sglang_hosts | default('blackwell') }}"
  gather_facts: false
  tasks:
    - name: Insist on a dry run with diffs
      ansible.builtin.assert:
        that: [ansible_check_mode, ansible_diff_mode]
    - name: A unit file a deploy would write
      ansible.builtin.copy:
        dest: "{{ fake_file }}"
        content: "[Service]\\n"
        mode: "0644"
"""


def one_local_host(tmp_path, unit):
    """An inventory of one local host in group gpu_nodes and the stand-in drift playbook, whose file is UNIT."""
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"gpu_nodes": {"hosts": {"gpu1": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "fake_file": str(unit)}}}}),
        encoding="utf-8")
    (tmp_path / "drift.yml").write_text(STAND_IN, encoding="utf-8")


def test_the_checkout_playbook_runs_the_check_and_reports(tmp_path):
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nTimeoutStopSec=1\n", encoding="utf-8")
    one_local_host(tmp_path, unit)
    reports = tmp_path / "reports"
    rc, outer = run_playbook("playbooks/drift_check.yml", {
        "sglang_hosts": "gpu_nodes", "drift_check_playbook": str(tmp_path / "drift.yml"),
        "drift_check_report_dir": str(reports), "drift_check_prom_file": str(tmp_path / "drift.prom")},
        inventory=str(tmp_path / "hosts.yml"))
    assert rc == 2, task_results(outer, "gpu1")
    report = json.loads((reports / "latest.json").read_text(encoding="utf-8"))
    assert report["exit_code"] == 1 and report["hosts"]["gpu1"]["status"] == "drift"
    assert 'sglang_drift_status{host="gpu1"} 1' in (tmp_path / "drift.prom").read_text(encoding="utf-8")
    assert unit.read_text(encoding="utf-8") == "[Service]\nTimeoutStopSec=1\n"  # the check changed nothing


def test_drift_check_fail_on_drift_false_reports_and_succeeds(tmp_path):
    unit = tmp_path / "u"
    unit.write_text("old\n", encoding="utf-8")
    one_local_host(tmp_path, unit)
    rc, outer = run_playbook("playbooks/drift_check.yml", {
        "sglang_hosts": "gpu_nodes", "drift_check_playbook": str(tmp_path / "drift.yml"),
        "drift_check_report_dir": str(tmp_path / "r"), "drift_check_fail_on_drift": False},
        inventory=str(tmp_path / "hosts.yml"))
    assert rc == 0, task_results(outer, "gpu1")
    assert json.loads((tmp_path / "r" / "latest.json").read_text(encoding="utf-8"))["exit_code"] == 1


def test_a_clean_check_changes_nothing_under_the_hosts_name_and_the_verdict_counts_hosts(tmp_path):
    """The report's tasks run on this control node under the first host's name: they are named as the control
    node's and counted as no change, so a clean check's recap says changed=0; the verdict counts hosts by status
    and says what the exit code means."""
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\n", encoding="utf-8")
    one_local_host(tmp_path, unit)
    args = {"sglang_hosts": "gpu_nodes", "drift_check_playbook": str(tmp_path / "drift.yml"),
            "drift_check_report_dir": str(tmp_path / "reports")}
    rc, outer = run_playbook("playbooks/drift_check.yml", args, inventory=str(tmp_path / "hosts.yml"))
    assert rc == 0, task_results(outer, "gpu1")
    assert outer["stats"]["gpu1"]["changed"] == 0, task_results(outer, "gpu1")
    assert (tmp_path / "reports" / "latest.json").is_file()
    names = [task["task"]["name"] for task in outer["plays"][-1]["tasks"]]
    assert outer["plays"][-1]["play"]["name"] == "Drift check and report" and names, names
    assert all(name.startswith("Control node: ") for name in names), names
    assert task_results(outer, "gpu1")[-1][1]["msg"] == "drift check: clean: 1 host, 1 clean; exit code 0 (every " \
                                                        "host clean)"
    unit.write_text("[Service]\nTimeoutStopSec=1\n", encoding="utf-8")
    rc, outer = run_playbook("playbooks/drift_check.yml", args, inventory=str(tmp_path / "hosts.yml"))
    assert rc == 2 and outer["stats"]["gpu1"]["changed"] == 0
    assert task_results(outer, "gpu1")[-1][1]["msg"] == (
        "drift check: drift: 1 host, 1 drift; exit code 1 (a host drifted, none failed or was unreachable); report "
        "%s/latest.json" % (tmp_path / "reports"))
