"""The rolling plays of playbooks/ (restarts, benchmark batches) take their hosts in inventory order, whichever host
joined the play's group first. Real ansible-playbook, local hosts nested as in the lab (lab -> blackwell), the
group filled in reverse, and each play's own `hosts:` expression read from the playbook."""
import json
import re

import yaml

from tests.helpers.ansible_run import REPO, run_playbook

HOSTS = ["gpu1", "gpu2", "gpu3"]


def rolling_plays():
    """[(playbook:play name, its hosts expression)] of every play that rolls over a group."""
    found = []
    for playbook in ("playbooks/deploy.yml", "playbooks/benchmark.yml"):
        with open("%s/%s" % (REPO, playbook)) as handle:
            for play in yaml.safe_load(handle):
                if "sglang_rolling_hosts" in str(play.get("hosts", "")):
                    # Without the group a play leaves out (the gate's hosts that did not pass, which this test fills
                    # as it fills every group): the order is the same; test_gate_fails_every_host.py runs with it.
                    hosts = re.sub(r"(hostvars \| default\(\[\]\)), '[a-z_]+'\)", r"\1)", play["hosts"])
                    found.append(("%s:%s" % (playbook, play["name"]), hosts))
    return found


def test_every_rolling_play_takes_its_hosts_in_inventory_order(tmp_path):
    plays = rolling_plays()
    assert len(plays) >= 5
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"lab": {
        "children": {"blackwell": {"hosts": {name: {} for name in HOSTS}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}))
    groups = [hosts.split("sglang_rolling_hosts('", 1)[1].split("'", 1)[0] for _name, hosts in plays]
    # One group_by task per host, last host first: each group is filled in the reverse of inventory order.
    fill = [{"name": "Join as %s" % name, "ansible.builtin.group_by": {"key": "{{ item }}"}, "loop": groups,
             "when": "inventory_hostname == %s" % json.dumps(name)} for name in reversed(HOSTS)]
    playbook = [{"name": "Fill the groups", "hosts": "blackwell", "gather_facts": False, "tasks": fill}]
    playbook += [{"name": name, "hosts": hosts, "gather_facts": False, "serial": 1,
                  "tasks": [{"name": "Take a turn", "ansible.builtin.debug": {"msg": "{{ inventory_hostname }}"}}]}
                 for name, hosts in plays]
    (tmp_path / "rolling.yml").write_text(yaml.safe_dump(playbook, sort_keys=False))
    rc, report = run_playbook(str(tmp_path / "rolling.yml"), inventory=str(inventory))
    assert rc == 0, report
    for name, _hosts in plays:
        turns = [list(task["hosts"]) for play in report["plays"] if play["play"]["name"] == name
                 for task in play["tasks"]]
        assert turns == [[host] for host in HOSTS], name
