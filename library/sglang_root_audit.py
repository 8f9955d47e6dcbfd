#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/root_audit.py (all logic lives there)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_root_audit
short_description: Fail when a user other than root can write a path root writes, reads to decide or executes
version_added: "0.1.0"
description:
  - "Audits each path of O(paths) and O(optional_paths) and every folder above it up to C(/), and every entry of
    each folder of O(trees), without following links (C(lstat)); a link is audited as an entry, then through the chain
    its target resolves to."
  - "An entry breaks a rule when it is owned by a uid other than 0 (C(owner)), has the group write bit set whatever
    its group, group root included (C(group-writable)), or the write bit for others, a sticky folder such as C(/tmp)
    included (C(other-writable)); a link whose target lies where one of these holds is named too (C(link-target)).
    A listed path that does not exist is C(absent); one that cannot be examined is C(unexaminable)."
  - Fails with one message listing every finding; otherwise returns how many entries were audited.
  - Changes nothing on the host; C(changed) is always false.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  paths:
    description: Absolute paths (files, folders or links) audited with every folder above them; each must exist.
    type: list
    elements: path
    default: []
  optional_paths:
    description:
      - Absolute paths audited like O(paths) when they exist (a record written only on some hosts).
      - When one does not exist, the folders above it that do are still audited (a user who can write one of them
        could create it).
    type: list
    elements: path
    default: []
  trees:
    description:
      - Absolute folders audited like O(paths), then every entry below them (a venv, a models tree); each must exist.
      - Links inside are not followed; a link to a folder outside the tree has its target's chain audited, not that
        folder's content (list it here too for that).
    type: list
    elements: path
    default: []
notes:
  - Supports check mode (it only reads).
  - Run it as root; a path root cannot examine is a finding.
"""

EXAMPLES = r"""
- name: Only root can change what the roles wrote or run
  sglang_root_audit:
    paths:
      - /opt/sglang/current
      - /etc/sglang/runtime.env
      - /etc/systemd/system/sglang.service
    optional_paths:
      - /etc/sglang/api-key.yaml
    trees:
      - /opt/sglang/venvs/0.5.23-abc
      - /opt/sglang-hf-client/venv
  register: audit

- name: Say how much was audited
  ansible.builtin.debug:
    msg: "{{ audit.audited }} entries, none writable by another user"
"""

RETURN = r"""
changed:
  description: Always false.
  returned: always
  type: bool
audited:
  description: How many entries (paths, the folders above them, link targets, tree entries) were examined, each once.
  returned: always
  type: int
  sample: 48213
findings:
  description: Every entry a user other than root can write, in the order found, each once per rule (empty on success).
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The entry.
      type: str
      sample: /var/lib/sglang
    rule:
      description: C(owner), C(group-writable), C(other-writable), C(link-target), C(absent) or C(unexaminable).
      type: str
      sample: owner
    writers:
      description: Who besides root can write it (empty for C(absent) and C(unexaminable)).
      type: list
      elements: str
      sample: ["uid 998 (sglang)"]
    detail:
      description: What was seen (the entry's kind, owner, mode and group, or the link's target).
      type: str
      sample: a folder owned by uid 998 (sglang)
    via:
      description: The link through which the entry was reached, when it was reached through one.
      type: str
      returned: when reached through a link
msg:
  description: On failure, every finding on one line each, separated by C(; ); otherwise how much was audited.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import param_checks
from ansible.module_utils import root_audit

LISTS = ("paths", "optional_paths", "trees")


def main():
    module = AnsibleModule(
        argument_spec=dict((name, dict(type="list", elements="path", default=[])) for name in LISTS),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_root_audit", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    relative = ["%s: %s" % (name, path) for name in LISTS for path in params[name] if not os.path.isabs(path)]
    if relative:
        module.fail_json(msg="sglang_root_audit audits absolute paths only, got %s" % "; ".join(relative))
    if not any(params[name] for name in LISTS):
        module.fail_json(msg="sglang_root_audit was given nothing to audit: paths, optional_paths and trees are "
                             "all empty")
    findings, audited = root_audit.audit(params["paths"], params["trees"], params["optional_paths"])
    if findings:
        module.fail_json(changed=False, audited=audited, findings=findings,
                         msg="%d of %d entries audited break the rule that only root can write them: %s"
                         % (len(set(item["path"] for item in findings)), audited,
                            "; ".join(root_audit.describe(item) for item in findings)))
    module.exit_json(changed=False, audited=audited, findings=[],
                     msg="%d entries audited: only root can write any of them" % audited)


if __name__ == "__main__":
    main()
