#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/venv_prune.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_venv_prune
short_description: Remove old lock venvs of sglang_install, never one that is active or may be rolled back to
version_added: "0.1.0"
description:
  - sglang_install installs every lock into its own venv under C(<root>/venvs) and never reinstalls one; with the
    CUDA closure each venv holds about 10 GB. This module removes the ones nothing needs.
  - Kept are the venv C(<root>/current) points at, every venv held by a saved state that may be restored (a file in
    its C(.sglang-keep/) names the state file, and the hold counts only while that state file still names this
    venv, as for the benchmark gate's known-good state), incomplete venvs (not marked C(.sglang-install-complete)), and
    the I(keep) most recently installed complete venvs. Without a C(current) symlink nothing is removed.
  - Each removal renames the venv to C(.removing-<name>) first (atomic), then deletes it; a C(.removing-*) folder
    left by an interrupted run is deleted by the next one. Lock copies in C(<root>/locks) are kept (they are small
    and say what was installed).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  root:
    description: sglang_install's root (C(venvs/), C(current)).
    type: path
    required: true
  keep:
    description: How many of the most recently installed complete venvs to keep (the active one counts among them).
    type: int
    default: 3
  active:
    description:
      - The venv this run makes active (sglang_install_active_venv). In a dry run before the install it may not
        exist yet and C(current) may still point at the old one; it counts as active and newest, so the dry run
        says what the real run removes. A real run where C(current) points elsewhere all the same keeps both.
    type: path
notes:
  - Supports check mode (reports what would go) and diff mode (the venv names before and after).
  - Run it after the server restarted on the new venv, never before it (a running server may still import from the
    previous one).
"""

EXAMPLES = r"""
- name: Remove old lock venvs, keeping the three most recent
  sglang_venv_prune:
    root: /opt/sglang
    keep: 3
"""

RETURN = r"""
removed: {description: "Venvs removed (would be, in check mode).", returned: always, type: list, elements: str}
kept: {description: "Each kept venv's name: why it stays.", returned: always, type: dict}
freed_bytes: {description: Disk space the removed venvs held., returned: always, type: int}
leftovers: {description: Folders of interrupted removals deleted (would be)., returned: always, type: list, elements: str}
stale_holds: {description: Hold files whose saved state no longer names their venv (ignored)., returned: always, type: list, elements: str}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import venv_prune
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(root=dict(type="path", required=True), keep=dict(type="int", default=3),
                           active=dict(type="path")),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_venv_prune", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    root, keep = module.params["root"], module.params["keep"]
    if keep < 1:
        module.fail_json(msg="keep must be 1 or more (the active venv always stays), got %d" % keep)
    problem = venv_prune.root_problem(root)
    if problem:
        module.fail_json(msg=problem, changed=False)
    try:
        found = venv_prune.scan(root)
    except OSError as exc:
        module.fail_json(msg="cannot read the venvs under %s: %s; nothing was removed" % (root, exc), changed=False)
    found = venv_prune.with_active(found, module.params["active"], dry_run=module.check_mode)
    kept, remove = venv_prune.plan(found, keep)
    paths = {venv["name"]: venv["path"] for venv in found["venvs"]}
    existing = sorted(venv["name"] for venv in found["venvs"] if not venv.get("not_yet"))
    result = {"removed": [paths[name] for name in remove], "kept": kept, "leftovers": found["leftovers"],
              "freed_bytes": sum(venv_prune.disk_bytes(path) for path in [paths[n] for n in remove]
                                 + found["leftovers"]),
              "stale_holds": [path for venv in found["venvs"] for path in venv["stale"]]}
    result["changed"] = bool(remove or found["leftovers"])
    if module._diff:
        leftovers = sorted(os.path.basename(path) for path in found["leftovers"])
        result["diff"] = {"before": "".join("%s\n" % name for name in existing + leftovers),
                          "after": "".join("%s\n" % name for name in sorted(kept)),
                          "before_header": root + "/venvs", "after_header": root + "/venvs"}
    if not module.check_mode:
        for path in found["leftovers"] + result["removed"]:
            try:
                venv_prune.remove(path)
            except OSError as exc:
                module.fail_json(msg="removing %s failed: %s (current and every kept venv are untouched)"
                                 % (path, exc), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
