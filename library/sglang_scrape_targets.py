#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/scrape_targets.py (runs on the control node)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_scrape_targets
short_description: Write Prometheus file_sd target files for the hosts of a deployed group
version_added: "0.1.0"
description:
  - Writes C(<dest>/<group>-node.json) (node_exporter on every host) and C(<dest>/<group>-sglang.json) (each
    server's C(/metrics), for servers that listen beyond loopback) in the form Prometheus' C(file_sd_configs) reads,
    each target labelled C(host) (its inventory name) and C(group).
  - A server listening on loopback only is left out of the C(sglang) file and named in RV(loopback).
  - Each file is replaced atomically and only when its content changes; check and diff mode say what would change.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  dest:
    description: The folder Prometheus reads the files from (it must exist).
    type: path
    required: true
  group:
    description: The inventory group deployed (the files' names and the C(group) label).
    type: str
    required: true
  hosts:
    description:
      - One entry per host, each with C(name) (inventory name), C(address) (where Prometheus reaches the host),
        C(listen) (the server's listen address, sglang_server_host; empty for every interface) and C(port).
    type: list
    elements: dict
    required: true
  node_port:
    description: node_exporter's port on the hosts.
    type: int
    default: 9100
"""

EXAMPLES = r"""
- name: Targets for the group blackwell
  sglang_scrape_targets:
    dest: /etc/prometheus/file_sd
    group: blackwell
    hosts:
      - {name: gpu1, address: gpu1.example.org, listen: 0.0.0.0, port: 30000}
      - {name: gpu2, address: 10.0.0.2, listen: 127.0.0.1, port: 30000}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
files:
  description: The two files, node first.
  returned: always
  type: list
  elements: str
loopback:
  description: The hosts whose server listens on loopback only (no C(sglang) target).
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import atomic_files
from ansible.module_utils import param_checks
from ansible.module_utils import scrape_targets


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            group=dict(type="str", required=True),
            hosts=dict(type="list", elements="dict", required=True),
            node_port=dict(type="int", default=9100),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_scrape_targets", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    try:
        groups = scrape_targets.targets(p["hosts"], p["group"], p["node_port"])
    except scrape_targets.TargetError as exc:
        module.fail_json(msg="sglang_scrape_targets: %s; nothing written" % exc)
    if not os.path.isdir(p["dest"]):
        module.fail_json(msg="sglang_scrape_targets: %s is not a folder; nothing written" % p["dest"])
    files, plans = [], []
    for job in scrape_targets.JOBS:
        path = os.path.join(p["dest"], "%s-%s.json" % (p["group"], job))
        text = scrape_targets.render(groups[job])
        try:
            old = atomic_files.read_regular(path)
        except atomic_files.RecordError as exc:
            module.fail_json(msg="sglang_scrape_targets: %s; nothing written" % exc)
        files.append(path)
        if old != text:
            plans.append((path, old, text))
    result = dict(changed=bool(plans), files=files, loopback=groups["loopback"])
    if module._diff and plans:
        result["diff"] = [atomic_files.record_diff(path, old, text) for path, old, text in plans]
    if not module.check_mode:
        for path, _old, text in plans:
            try:
                atomic_files.write_atomic(path, text.encode("utf-8"), mode=0o644)
            except (OSError, atomic_files.TransactionError) as exc:
                module.fail_json(msg="sglang_scrape_targets: writing %s failed: %s" % (path, exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
