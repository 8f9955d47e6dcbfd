"""playbooks/benchmark.yml's rolling plays keep a host that fails (rescue: sglang_benchmark's not_passed) and its
last play fails each one once every host had its turn: a host failing in a batch of its own (serial 1) no longer ends
the run with the hosts of later batches ungated and shown as not failed. Real ansible-playbook, local hosts, each
rolling play as benchmark.yml writes it (hosts, rescue) with its role task replaced by one that fails on gpu1."""
import yaml

from tests.helpers.ansible_run import REPO, run_playbook, task_results

HOSTS = ["gpu1", "gpu2", "gpu3"]
TURN = "Take a turn"


def load(path):
    with open("%s/%s" % (REPO, path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def gate_plays():
    """benchmark.yml's rolling plays, then the play that fails the hosts that did not pass (plays/gate_not_passed.yml,
    which benchmark.yml imports last)."""
    plays = load("playbooks/benchmark.yml")
    assert plays[-1]["ansible.builtin.import_playbook"] == "plays/gate_not_passed.yml"
    return [play for play in plays if "sglang_rolling_hosts" in str(play.get("hosts", ""))] + \
        load("playbooks/plays/gate_not_passed.yml")


def test_deploy_records_the_hosts_that_passed_before_it_fails_the_others():
    # A play that fails every host it runs on ends the playbook: deploy.yml defers the gate's last play until after
    # its last converge record, which leaves out the hosts that did not pass (they publish their metrics only).
    imports = [play.get("ansible.builtin.import_playbook") for play in load("playbooks/deploy.yml")]
    gate, record, fail = (imports.index("benchmark.yml"), len(imports) - 1 - imports[::-1].index(
        "plays/converge_record.yml"), imports.index("plays/gate_not_passed.yml"))
    assert gate < record < fail == len(imports) - 1
    assert load("playbooks/deploy.yml")[gate]["vars"]["sglang_benchmark_fail_later"] is True
    record = next(task for task in load("playbooks/plays/converge_record.yml")[0]["tasks"] if task["name"] == "Record")
    assert any("'sglang_benchmark_not_passed' not in group_names" in condition for condition in record["when"])


def test_a_host_that_fails_in_a_batch_of_its_own_fails_last_and_the_others_are_gated(tmp_path):
    plays = gate_plays()
    rolling = [play for play in plays if play.get("serial")]
    assert len(rolling) == 4 and all(play["tasks"][0].get("rescue") for play in rolling)
    last = plays[-1]
    assert not last.get("serial") and "sglang_benchmark_not_passed" in last["hosts"]
    groups = ["sglang_benchmark_baseline", "sglang_benchmark_trials", "sglang_benchmark_measure",
              "sglang_benchmark_failed"]
    playbook = [{"name": "Fill the groups", "hosts": "blackwell", "gather_facts": False, "tasks": [
        {"name": "Join", "ansible.builtin.group_by": {"key": "{{ item }}"}, "loop": groups}]}]
    for play in rolling:
        block = play["tasks"][0]
        playbook.append({"name": play["name"], "hosts": play["hosts"], "gather_facts": False, "serial": 1,
                         "tasks": [{"name": block["name"], "rescue": block["rescue"], "block": [
                             {"name": TURN, "ansible.builtin.fail": {"msg": "boom"},
                              "when": "inventory_hostname == 'gpu1'"}]}]})
    playbook.append(last)
    (tmp_path / "gate.yml").write_text(yaml.safe_dump(playbook, sort_keys=False))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"blackwell": {"hosts": {name: {} for name in HOSTS}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}))
    rc, report = run_playbook(str(tmp_path / "gate.yml"), inventory=str(inventory))
    assert rc != 0
    stats = report["stats"]
    assert stats["gpu1"]["failures"] == 1 and stats["gpu2"]["failures"] == 0 and stats["gpu3"]["failures"] == 0
    # gpu2 and gpu3 had their turn in every rolling play; gpu1 failed in the first and was left out of the rest.
    for host in ("gpu2", "gpu3"):
        assert [name for name, _result in task_results(report, host)].count(TURN) == 4, host
    assert [name for name, _result in task_results(report, "gpu1")].count(TURN) == 1
    failed = [result for name, result in task_results(report, "gpu1") if name == "Fail a host that did not pass the gate"]
    assert failed[0]["msg"] == "gpu1 did not pass the benchmark gate: task '%s' failed: boom" % TURN
