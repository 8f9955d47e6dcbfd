#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/model_prune.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_prune
short_description: Remove a model's old revisions once the server runs another
version_added: "0.1.0"
description:
  - Keeps the revision C(<models_dir>/<name>/current) points at (what the server loads) and the revisions in
    I(keep); removes every other revision C(sglang_model_fetch) recorded there, with its record and progress file,
    and the C(.partial-) folder of any revision not kept.
  - A path source's own folder (outside I(models_dir)) is never removed, only its record; anything the store did not
    make stays.
  - Nothing is removed through a link (folders go by a walk relative to their descriptors). A link in the place of a
    revision or C(.partial-) folder, a model or records folder root does not own alone, a record named as no
    revision, or a C(current) link naming no recorded revision is refused, naming the path and the rule, and
    nothing is pruned.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  models_dir:
    description: The models directory (absolute).
    type: path
    required: true
  name:
    description: The model's folder under I(models_dir).
    type: str
    required: true
  keep:
    description: Revisions to keep besides the one current points at (the ones this deploy wants).
    type: list
    elements: str
    default: []
notes:
  - Supports check mode (what would be removed) and diff mode (the paths before, none after).
"""

EXAMPLES = r"""
- name: Remove the old revisions of the model
  sglang_model_prune:
    models_dir: /var/lib/sglang-models
    name: Kimi-K2.5
    keep: [v4]
"""

RETURN = r"""
removed:
  description: The folders and files removed (in check mode, that would be).
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import model_prune
from ansible.module_utils import param_checks
from ansible.module_utils.model_manifest import ModelError


def main():
    module = AnsibleModule(
        argument_spec=dict(models_dir=dict(type="path", required=True), name=dict(type="str", required=True),
                           keep=dict(type="list", elements="str", default=[])),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_model_prune", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    try:
        removed = model_prune.prune(params["models_dir"], params["name"], params["keep"], module.check_mode)
    except ModelError as exc:
        module.fail_json(msg=param_checks.printable("sglang_model_prune: %s" % exc), changed=False)
    except OSError as exc:
        module.fail_json(msg=param_checks.printable(
            "sglang_model_prune: %s: %s (what was removed before stays removed; run again)" % (
                exc.filename or params["models_dir"], exc.strerror or exc)), changed=False)
    result = dict(changed=bool(removed), removed=param_checks.printable(removed))
    if module._diff and removed:
        result["diff"] = {"before": "".join(path + "\n" for path in removed), "after": "",
                          "before_header": params["name"], "after_header": params["name"]}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
