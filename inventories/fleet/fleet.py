#!/usr/bin/env python3
"""The fleet lab's hosts: FLEET_SIZE (default 2) lab hosts fleet-gpu1..N, SSH on 127.0.0.1:2300+K, the simulated
GPU profiles alternating 8x and 2x RTX PRO 6000 (mixed tensor-parallel sizes, as a real fleet has).

This file owns the names, ports and profiles: Ansible reads it as a script inventory (--list), and lab/bench-fleet.sh
asks it for the LAB_HOSTS that lab/up.sh and lab/down.sh take (--lab-hosts), so the containers and the inventory
cannot disagree. Test lab only (the GPUs are simulated); the group variables are the 2-host lab's
(group_vars is a symlink to inventories/lab/group_vars, as in inventories/lab-drift).
  FLEET_SIZE=8 ansible-playbook -i inventories/fleet deploy.yml -l blackwell
  LAB_HOSTS="$(FLEET_SIZE=8 inventories/fleet/fleet.py --lab-hosts)" lab/up.sh
"""
import json
import os
import sys

NAME = "fleet-gpu{}"
BASE_PORT = 2300
MAX_SIZE = 19  # ports 2301..2319: clear of lab-gpu* (222x), drift-gpu* (223x) and dev-gpu* (224x)
PROFILES = ("rtxpro6000-8x-pcie", "rtxpro6000-2x-pcie")


def size(environ):
    """FLEET_SIZE as a host count, or a message saying what is wrong with it."""
    raw = environ.get("FLEET_SIZE", "2").strip()
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_SIZE:
        raise ValueError("FLEET_SIZE must be a whole number from 1 to %d (ports 2301..%d), not %r" % (MAX_SIZE, BASE_PORT + MAX_SIZE, raw))
    return int(raw)


def hosts(count):
    """[(name, port, profile)] for fleet-gpu1..count."""
    return [(NAME.format(k), BASE_PORT + k, PROFILES[(k - 1) % len(PROFILES)]) for k in range(1, count + 1)]


def lab_hosts(count):
    """The LAB_HOSTS value (name:port:profile ...) lab/up.sh and lab/down.sh take."""
    return " ".join("%s:%d:%s" % host for host in hosts(count))


def inventory(count):
    """The script-inventory JSON: group blackwell (child of fleet), connection settings as in inventories/lab."""
    return {
        "fleet": {
            "children": ["blackwell"],
            "vars": {
                "ansible_host": "127.0.0.1",
                "ansible_user": "root",
                # Made once by lab/up.sh.
                "ansible_ssh_private_key_file": "{{ inventory_dir }}/../../.cache/lab/ssh/id_ed25519",
                # New host keys on every container: nothing to pin on throw-away test hosts.
                "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                                           "-o LogLevel=ERROR -o IdentitiesOnly=yes",
                # The key exchange of inventories/lab (why it is there); lab/bench-fleet.sh also measures without.
                "ansible_ssh_extra_args": "-o KexAlgorithms=curve25519-sha256",
                "ansible_python_interpreter": "/usr/bin/python3",
                # How the hosts reach each other (lab/up.sh writes their names into every /etc/hosts), for a peer
                # model source: the seed's name and port 22, not the controller's 127.0.0.1 forward.
                "sglang_model_peer_address": "{{ inventory_hostname }}",
                "sglang_model_peer_port": 22,
            },
        },
        "blackwell": {"hosts": [name for name, _, _ in hosts(count)]},
        "_meta": {"hostvars": {name: {"ansible_port": port, "lab_gpu_profile": profile}
                               for name, port, profile in hosts(count)}},
    }


def main(argv, environ):
    try:
        count = size(environ)
    except ValueError as exc:
        sys.stderr.write("fleet.py: %s\n" % exc)
        return 2
    if argv[1:2] == ["--lab-hosts"]:
        print(lab_hosts(count))
    elif argv[1:2] == ["--list"]:
        print(json.dumps(inventory(count), indent=1, sort_keys=True))
    elif argv[1:2] == ["--host"]:
        print("{}")  # every host's variables are in --list's _meta
    else:
        sys.stderr.write("usage: fleet.py --list | --host NAME | --lab-hosts   (FLEET_SIZE=N, default 2)\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv, os.environ))
