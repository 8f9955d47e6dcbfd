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
