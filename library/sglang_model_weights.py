#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/model_fit.py's read_weights (runs on the GPU host, reads only)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_weights
short_description: Read the size of a model revision's weight files from what the host holds of it
version_added: "0.1.0"
description:
  - Reads the revision's verification record (C(<models_dir>/<name>/.state/<revision>.json), written by
    C(sglang_model_fetch), trusted only where root alone could write it), else I(manifest), a C(path) source's
    manifest on the host; sums the sizes of the weight files (C(.safetensors), C(.bin), C(.pt), C(.pth), C(.gguf)).
  - Fetches nothing and changes nothing. A revision the host does not hold yet (a mirror's or a hub's) is reported
    as not known (I(known) false, with I(why)), never as an error.
  - The deploy preflight (C(sglang_deploy_preflight)) runs it to judge the model's fit against GPU memory.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  models_dir:
    description: The models directory (absolute), as sglang_model_fetch is given it.
    type: path
    required: true
  name:
    description: The model's folder under I(models_dir).
    type: str
    required: true
  revision:
    description: The revision.
    type: str
    required: true
  manifest:
    description: A C(path) source's manifest on the host (absolute), read where the revision has no record yet.
    type: path
notes:
  - Supports check mode (it only reads).
"""

EXAMPLES = r"""
- name: Read the size of the model's weights
  sglang_model_weights:
    models_dir: /var/lib/sglang/models
    name: Kimi-K2.5
    revision: v3
  register: weights
"""

RETURN = r"""
known: {description: Whether the size could be read., returned: always, type: bool}
why: {description: Why the size is not known., returned: when known is false, type: str}
weight_bytes: {description: The size of the weight files in bytes., returned: when known, type: int}
weight_files: {description: How many weight files the revision has., returned: when known, type: int}
total_bytes: {description: The size of every file of the revision in bytes., returned: when known, type: int}
read_from: {description: The record or manifest the sizes were read from., returned: when known, type: str}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import model_fit
from ansible.module_utils import model_manifest as mm
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(argument_spec=dict(models_dir=dict(type="path", required=True),
                                              name=dict(type="str", required=True),
                                              revision=dict(type="str", required=True),
                                              manifest=dict(type="path")),
                           supports_check_mode=True)
    params = module.params
    refused = param_checks.refusal("sglang_model_weights", module.argument_spec, params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(params)})
    for key in ("models_dir", "manifest"):
        if params[key] is not None and not params[key].startswith("/"):
            module.fail_json(msg="sglang_model_weights: %s must be an absolute path, got %r" % (key, params[key]))
    problem = mm.revision_problem("revision", params["revision"])
    try:
        mm.check_name("name", params["name"])
    except mm.ModelError as exc:
        problem = str(exc)
    if problem:
        module.fail_json(msg="sglang_model_weights: %s" % problem)
    found = model_fit.read_weights(params["models_dir"], params["name"], params["revision"], params["manifest"])
    module.exit_json(changed=False, **param_checks.printable(found))


if __name__ == "__main__":
    main()
