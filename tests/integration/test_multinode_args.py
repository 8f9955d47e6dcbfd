"""sglang_server_multinode_group: every node of one multi-node server gets --nnodes, its --node-rank in inventory order
and the first node's --dist-init-addr, however the group was made (here by group_by, filled last host first); a
group this host is not in is refused by name. Real ansible-playbook, sglang_server's preflight on local hosts in
check mode (no venv: no flag is checked against an SGLang)."""
import json

import yaml

from tests.helpers.ansible_run import run_playbook, task_results

NODES = ["node1", "node2", "node3"]


def preflight(tmp_path, group_of=None, group="server_a"):
    """{host: sglang_server_args or the failure message} with the group filled in reverse inventory order."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"fleet": {
        "children": {"rack": {"hosts": {name: {"ansible_host": "10.0.0.%d" % (i + 1)} for i, name in enumerate(NODES)}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}))
    members = NODES if group_of is None else group_of
    fill = [{"name": "Join as %s" % name, "ansible.builtin.group_by": {"key": "server_a"},
             "when": "inventory_hostname == %s" % json.dumps(name)} for name in reversed(members)]
    playbook = tmp_path / "multinode.yml"
    playbook.write_text(yaml.safe_dump([
        {"name": "Form the server's group", "hosts": "rack", "gather_facts": False, "tasks": fill},
        {"name": "Preflight", "hosts": "rack", "gather_facts": False, "tasks": [
            {"name": "Check and assemble the arguments", "ansible.builtin.include_role": {
                "name": "sglang_server", "tasks_from": "preflight"}},
            {"name": "Show the arguments", "ansible.builtin.debug": {"var": "sglang_server_args"}}]},
    ], sort_keys=False))
    rc, report = run_playbook(str(playbook), {
        "sglang_server_multinode_group": group, "sglang_server_model_path": "/srv/models/m",
        "sglang_server_tp_size": 8, "sglang_server_venv": str(tmp_path / "no-venv")},
        check=True, inventory=str(inventory))
    found = {}
    for host in NODES:
        for name, result in task_results(report, host):
            if result.get("failed"):
                found[host] = result.get("msg", "")
                break
            if name == "Show the arguments":
                found[host] = result["sglang_server_args"]
    return rc, found


def option(argv, name):
    return argv[argv.index(name) + 1]


def test_node_ranks_follow_inventory_order_and_every_node_points_at_the_first(tmp_path):
    rc, found = preflight(tmp_path)
    assert rc == 0, found
    for rank, host in enumerate(NODES):
        argv = found[host]
        assert (option(argv, "--nnodes"), option(argv, "--node-rank")) == ("3", str(rank)), (host, argv)
        assert option(argv, "--dist-init-addr") == "10.0.0.1:50000"


def test_a_host_outside_the_group_is_refused_by_name(tmp_path):
    rc, found = preflight(tmp_path, group_of=["node1", "node2"])
    assert rc != 0
    assert "node3" in found["node3"] and "server_a" in found["node3"] and "Traceback" not in found["node3"]
    assert option(found["node1"], "--node-rank") == "0" and option(found["node2"], "--node-rank") == "1"


def test_a_group_that_does_not_exist_is_refused_by_name(tmp_path):
    rc, found = preflight(tmp_path, group="server_typo")
    assert rc != 0
    for host in NODES:
        assert "server_typo" in found[host] and "not an inventory group" in found[host], found[host]
