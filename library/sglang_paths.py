#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/path_state.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_paths
short_description: Directories with their owner, group and mode, and files that must be gone, in one module run
version_added: "0.1.0"
description:
  - For each directory, what M(ansible.builtin.file) with C(state=directory) does (created with missing parents,
    owner, group and mode set); for each absent path, what C(state=absent) does for a file or symlink. One call
    checks a whole layout, so a deploy that changes nothing pays one module run on the host, not one per path.
  - Everything is checked before anything changes (a path that is not absolute, a mode that is not octal, a file
    where a directory belongs, a directory where a file should be removed).
  - Unlike M(ansible.builtin.file), a symlink where a directory belongs is refused, naming it and its target (an
    owner or mode set through it would change the target). Owners and modes are set without following a link.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  directories:
    description: Directories to hold, in order (parents before children).
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: "Absolute, normalized path.", type: path, required: true}
      owner: {description: User name., type: str, required: true}
      group: {description: Group name., type: str, required: true}
      mode: {description: "Octal mode as a string (C('0750')).", type: str, required: true}
  absent:
    description: Files or symlinks that must not exist (a directory here is refused, never removed).
    type: list
    elements: path
    default: []
notes:
  - Supports check mode (a user or group created earlier in the same dry run is not there yet; its directories are
    reported as changes) and diff mode (one line per change).
"""

EXAMPLES = r"""
- name: Create the layout
  sglang_paths:
    directories:
      - {path: /opt/sglang, owner: root, group: root, mode: "0755"}
      - {path: /var/lib/sglang, owner: sglang, group: sglang, mode: "0750"}
    absent: [/etc/sglang/api-key.env]
"""

RETURN = r"""
changes:
  description: One C({path, action, detail}) per change made (would be, in check mode); action is create, owner, mode or remove.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import path_state
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True), owner=dict(type="str", required=True),
                group=dict(type="str", required=True), mode=dict(type="str", required=True))),
            absent=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_paths", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    try:
        changes, wanted = path_state.plan(module.params["directories"], module.params["absent"])
        if changes and not module.check_mode:
            path_state.apply(changes, wanted)
    except path_state.PathError as exc:
        module.fail_json(msg="sglang_paths: %s" % exc)
    except OSError as exc:
        module.fail_json(msg="sglang_paths: %s: %s" % (exc.filename, exc.strerror))
    result = dict(changed=bool(changes),
                  changes=[dict(path=path, action=action, detail=detail) for path, action, detail in changes])
    if module._diff:
        result["diff"] = path_state.diff(changes)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
