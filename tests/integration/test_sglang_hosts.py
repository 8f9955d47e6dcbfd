"""The host group of the playbooks (sglang_hosts): a group the inventory does not have, or sglang_hosts set where a
play's hosts never read it (group_vars), fails the run with a message that says how to name the group, instead of
every play skipping and rc 0. Real ansible-playbook on local hosts of an inventory written here, named `gpu_nodes`
(no `blackwell`, the default); a named group runs each playbook's plays on its hosts (stopped there by a refused
setting, so nothing is deployed onto this machine)."""
import pytest
import yaml

from tests.helpers.ansible_run import run_playbook, task_results

PLAYBOOKS = ["playbooks/deploy.yml", "playbooks/benchmark.yml", "playbooks/drift.yml", "playbooks/fusion_patch.yml",
             "playbooks/allreduce_bench.yml", "playbooks/drift_check.yml", "playbooks/scrape_targets.yml"]
CHECK = "Require a group that names hosts of the inventory, set where the plays read it"
HOST = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}


def inventory(tmp_path, group_vars=None, groups=None):
    folder = tmp_path / "inventory"
    folder.mkdir()
    (folder / "hosts.yml").write_text(yaml.safe_dump(groups or {"gpu_nodes": {"hosts": {"gpu-a": HOST, "gpu-b": HOST}}}))
    if group_vars:
        (folder / "group_vars").mkdir()
        (folder / "group_vars" / "all.yml").write_text(yaml.safe_dump(group_vars))
    return str(folder)


def check_failure(report):
    """The check play's failure message, from whichever host it ran once on."""
    for play in report["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == CHECK:
                for result in task["hosts"].values():
                    if result.get("failed"):
                        return result["msg"]
    return None


def ran_after_the_check(report, host):
    """Names of the tasks host ran (not skipped) in the plays after the check (deploy.yml runs it again when it
    imports benchmark.yml) and the fast path's comparison (no record here: every play runs)."""
    plays = [play for play in report["plays"]
             if not play["play"]["name"].startswith(("Check the host group ", "Compare each host with its last converge"))]
    return [name for name, result in task_results({"plays": plays}, host) if not result.get("skipped")]


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_a_group_the_inventory_lacks_fails_with_how_to_name_it(tmp_path, playbook):
    rc, report = run_playbook(playbook, inventory=inventory(tmp_path))
    assert rc != 0
    msg = check_failure(report)
    assert msg and "no host matched 'blackwell'" in msg, report["plays"][0]
    assert "-e sglang_hosts=<group>" in msg and "gpu_nodes" in msg  # how, and the groups there are
    assert [play["play"]["name"] for play in report["plays"]] == [
        "Check the host group the plays run on: blackwell"]  # no other play started
    assert report["stats"]["gpu-a"]["changed"] == 0


def test_a_misspelled_group_fails_too(tmp_path):
    rc, report = run_playbook("playbooks/deploy.yml", {"sglang_hosts": "gpu_node"}, inventory=inventory(tmp_path))
    assert rc != 0
    assert "no host matched 'gpu_node' (sglang_hosts)" in check_failure(report)


def test_sglang_hosts_in_group_vars_is_named_as_ignored(tmp_path):
    rc, report = run_playbook("playbooks/deploy.yml", inventory=inventory(tmp_path, {"sglang_hosts": "gpu_nodes"}))
    assert rc != 0
    msg = check_failure(report)
    assert "sglang_hosts is 'gpu_nodes' in the inventory" in msg and "would run on 'blackwell'" in msg
    assert "-e sglang_hosts=gpu_nodes" in msg


def test_the_same_value_as_an_extra_var_passes_the_check(tmp_path):
    """group_vars and the extra var agree: the plays run on the group (refused there by a bad batch size)."""
    rc, report = run_playbook("playbooks/deploy.yml", {"sglang_hosts": "gpu_nodes", "deploy_serial": 0},
                              inventory=inventory(tmp_path, {"sglang_hosts": "gpu_nodes"}))
    assert rc != 0 and check_failure(report) is None
    assert ran_after_the_check(report, "gpu-a")[:1] == [
        "Check the batch sizes of the rolling plays before any host changes"]


@pytest.mark.parametrize("playbook, extra, first_task", [
    ("playbooks/deploy.yml", {"deploy_serial": 0}, "Check the batch sizes of the rolling plays before any host changes"),
    ("playbooks/benchmark.yml", {"deploy_serial": 0}, "Check the batch sizes of the gate's plays before any restart"),
    ("playbooks/drift.yml", {}, "Refuse to run except as a dry run"),
])
def test_a_named_group_runs_the_plays_on_its_hosts(tmp_path, playbook, extra, first_task):
    # Each playbook's first play stops at its first check (a batch size of 0; drift without --check): proof that
    # the plays ran on the group, and nothing is deployed onto this machine.
    rc, report = run_playbook(playbook, dict(extra, sglang_hosts="gpu_nodes"), inventory=inventory(tmp_path))
    assert rc != 0 and check_failure(report) is None
    assert ran_after_the_check(report, "gpu-a")[:1] == [first_task]  # run_once in deploy and benchmark


def test_a_limit_that_leaves_none_of_the_group_is_the_users_choice(tmp_path):
    """The group exists, the limit leaves none of it: rc 0 as ansible has it, with a line that says why."""
    groups = {"gpu_nodes": {"hosts": {"gpu-a": HOST}}, "blackwell": {"hosts": {"gpu-b": HOST}}}
    rc, report = run_playbook("playbooks/deploy.yml", inventory=inventory(tmp_path, groups=groups), limit="gpu-a")
    assert rc == 0 and check_failure(report) is None
    said = [result.get("msg", "") for _name, result in task_results(report, "gpu-a")]
    assert any("--limit gpu-a leaves none of the hosts of 'blackwell'" in line for line in said), said
    assert [play["play"]["name"] for play in report["plays"]][1:3] == [
        "Compare each host with its last converge (one module run a host)",
        "Prepare SM120 hosts (preflight, locked install, fusion patch, NCCL settings)"]
    assert ran_after_the_check(report, "gpu-a") == [] and ran_after_the_check(report, "gpu-b") == []
