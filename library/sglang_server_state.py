#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/server_state.py."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_state
short_description: Save or restore what an SGLang server runs (files and the venv symlink) on its host
version_added: "0.1.0"
description:
  - C(state=saved) copies the given files (absent ones are recorded as absent), notes where the venv symlink
    points and whether that venv carries the fusion patch, and replaces I(dir) as a whole (a new folder, then a
    rename), so an interrupted save leaves the previous state intact. Nothing is rewritten when the saved state
    already equals the host.
  - With I(hold), the saved venv gets C(.sglang-keep/<hold>.json) naming the state, so sglang_venv_prune keeps it.
  - C(state=restored) puts every saved file back (atomically, owner and mode included), removes files that were
    absent at save time, and points the symlink back. The fusion patch state is for the caller to restore (the
    sglang_fusion_patch module, from the returned I(link.patched)). Refused, with nothing touched, when the saved
    venv is gone.
  - C(state=query) says whether I(dir) holds a saved state (I(exists)), when it was saved and its link; it changes
    nothing. A folder that holds something else than a saved state is refused.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  dir:
    description: Absolute folder of the saved state.
    type: path
    required: true
  state:
    description: C(saved) records the host, C(restored) puts the record back, C(query) reads what is recorded.
    type: str
    choices: [saved, restored, query]
    default: saved
  files:
    description: Absolute paths to save (state=saved); a missing one is recorded as absent.
    type: list
    elements: path
    default: []
  globs:
    description: Patterns whose matches are saved too (state=saved).
    type: list
    elements: str
    default: []
  link:
    description: The venv symlink (sglang_install's C(current)) to record (state=saved).
    type: path
  hold:
    description: Name of a hold on the saved venv (state=saved), for sglang_venv_prune.
    type: str
notes:
  - Supports check mode (reports what a save or restore would change) and diff mode (the paths that differ).
"""

EXAMPLES = r"""
- name: Save the known-good state
  sglang_server_state:
    dir: /var/lib/sglang-deploy/known-good
    link: /opt/sglang/current
    files: [/etc/systemd/system/sglang.service, /etc/sglang/runtime.env]
    globs: ["/opt/sglang/venvs/x/lib/python3*/site-packages/sglang_nccl_env.p*"]
    hold: known-good

- name: Put it back
  sglang_server_state:
    dir: /var/lib/sglang-deploy/known-good
    state: restored
  register: restored

- name: Is there a known-good state to go back to?
  sglang_server_state:
    dir: /var/lib/sglang-deploy/known-good
    state: query
  register: known_good   # known_good.exists, .saved_at, .link
"""

RETURN = r"""
saved:
  description: The files recorded (state=saved).
  returned: state=saved
  type: list
  elements: str
link:
  description: The recorded symlink, its target venv and whether that venv carried the fusion patch (null when
    nothing is saved).
  returned: always
  type: dict
  sample: {"path": "/opt/sglang/current", "target": "/opt/sglang/venvs/lab-a-1234", "patched": true}
actions:
  description: What a restore did or would do, each {path, action} with action restore, remove or relink.
  returned: state=restored
  type: list
  elements: dict
saved_at:
  description: When the restored (or queried) state was saved (ISO 8601, UTC); null when none is.
  returned: state=restored or state=query
  type: str
exists:
  description: Whether I(dir) holds a saved state.
  returned: state=query
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import server_state
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type="path", required=True),
            state=dict(type="str", choices=["saved", "restored", "query"], default="saved"),
            files=dict(type="list", elements="path", default=[]),
            globs=dict(type="list", elements="str", default=[]),
            link=dict(type="path"),
            hold=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_server_state", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    try:
        if params["state"] == "saved":
            if params["hold"] and not params["hold"].replace("-", "").replace("_", "").isalnum():
                module.fail_json(msg="hold must be a plain name (letters, digits, - and _), got %r" % params["hold"])
            files = server_state.expand(params["files"], params["globs"])
            result = server_state.save(params["dir"], files, params["link"], params["hold"], module.check_mode)
            paths = result["saved"]
        elif params["state"] == "query":
            module.exit_json(**server_state.query(params["dir"]))
        else:
            result = server_state.restore(params["dir"], module.check_mode)
            paths = [action["path"] for action in result["actions"]]
    except server_state.StateError as exc:
        module.fail_json(msg="sglang_server_state: %s" % exc)
    except OSError as exc:
        where = getattr(exc, "filename", None) or params["dir"]
        module.fail_json(msg="sglang_server_state: %s: %s" % (where, exc.strerror or exc))
    if module._diff and result["changed"]:
        result["diff"] = {"before": "", "after": "".join("%s\n" % path for path in paths),
                          "after_header": params["dir"] + (" (saved)" if params["state"] == "saved" else " (restores)")}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
