#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/layout_migration.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_layout_migrate
short_description: Move the records and the models tree of an earlier layout out of the service user's home
version_added: "0.1.0"
description:
  - Hosts deployed before the root-owned layout kept the records root decides from (the deployed fingerprint, the
    gate's verdict, the canary records, the converge record, ...) and the models tree in the service user's home. This
    module creates I(state_dir) (root, 0755) and renames each entry of I(moves) and each name in a I(patterns) folder
    to its new place, then checks it there; nothing is copied.
  - An entry that is a link, a FIFO or a device, not owned by root, writable by group or others, a file with a second
    name (hard link), or a folder holding any of these, is not carried (put back where it was) and the module fails
    naming the path and the rule. An entry already at its new place is kept and the old one left alone.
  - Idempotent; after the move there is nothing left to do.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  state_dir:
    description: The root-owned folder of the records (created root 0755 when missing; its parent must exist).
    type: path
    required: true
  moves:
    description: "Entries to move, C({src: old path, dest: new path}); the dest's folder must be root's alone up to /."
    type: list
    elements: dict
    default: []
  patterns:
    description: "Every name in C(src_dir) that the fnmatch C(pattern) matches whole moves to C(dest_dir)."
    type: list
    elements: dict
    default: []
notes:
  - Supports check mode (reports what would move). Runs as root.
"""

EXAMPLES = r"""
- name: Move the earlier layout's records and models tree
  sglang_layout_migrate:
    state_dir: /var/lib/sglang-deploy
    moves:
      - {src: /var/lib/sglang-deploy/.deployed-config, dest: /var/lib/sglang-deploy/.deployed-config}
      - {src: /var/lib/sglang-models, dest: /var/lib/sglang-models}
    patterns:
      - {src_dir: /var/lib/sglang, dest_dir: /var/lib/sglang-deploy, pattern: "*-canary.json"}
"""

RETURN = r"""
moved: {description: "C(src -> dest) of each entry moved (would be, in check mode).", returned: success, type: list, elements: str}
kept: {description: "Entries whose new place already held one (the old one left alone).", returned: success, type: list, elements: str}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import layout_migration
from ansible.module_utils import param_checks


def _absolute(value, what):
    if not isinstance(value, str) or not os.path.isabs(value) or "\n" in value or "\x00" in value:
        raise layout_migration.MigrationRefused("%s must be an absolute path, got %r" % (what, value))
    return os.path.normpath(value)


def _pairs(params):
    moves = [(_absolute(item.get("src"), "moves[].src"), _absolute(item.get("dest"), "moves[].dest"))
             for item in params["moves"]]
    patterns = [(_absolute(item.get("src_dir"), "patterns[].src_dir"), _absolute(item.get("dest_dir"), "patterns[].dest_dir"),
                 str(item.get("pattern") or "")) for item in params["patterns"]]
    if any(not entry[2] or "/" in entry[2] for entry in patterns):
        raise layout_migration.MigrationRefused("patterns[].pattern must be a file name pattern without /")
    return layout_migration.plan(moves, patterns)


def main():
    module = AnsibleModule(
        argument_spec=dict(state_dir=dict(type="path", required=True),
                           moves=dict(type="list", elements="dict", default=[]),
                           patterns=dict(type="list", elements="dict", default=[])),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_layout_migrate", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused)
    moved, kept, made = [], [], False
    try:
        state_dir = _absolute(module.params["state_dir"], "state_dir")
        pairs = _pairs(module.params)  # every argument checked before anything is made
        made = layout_migration.ensure_folder(state_dir, module.check_mode)
        for src, dest in pairs:
            if module.check_mode and made and os.path.dirname(dest) == state_dir:
                outcome = "absent" if not os.path.lexists(src) else "would move"
            else:
                outcome = layout_migration.move(src, dest, module.check_mode)
            if outcome in ("moved", "would move"):
                moved.append("%s -> %s" % (src, dest))
            elif outcome == "kept" and os.path.lexists(src) and src != dest:
                kept.append(src)
    except layout_migration.MigrationRefused as exc:
        module.fail_json(msg="sglang_layout_migrate: %s" % exc, moved=moved)
    except OSError as exc:
        module.fail_json(msg="sglang_layout_migrate: %s: %s" % (exc.filename, exc.strerror), moved=moved)
    module.exit_json(changed=bool(moved or made), moved=moved, kept=kept)


if __name__ == "__main__":
    main()
