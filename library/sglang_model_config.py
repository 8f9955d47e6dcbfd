#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/model_config.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_config
short_description: Read the hidden size of a model on the host from its config.json
version_added: "0.1.0"
description:
  - Reads C(hidden_size) from the model directory's C(config.json) (top level, else C(text_config) or
    C(language_config), as multimodal wrappers such as Kimi-K2.5 keep it). Every all-reduce of a verify step is
    tokens x hidden, so fusion_patch's canary proves the model's own shape with it; sglang_allreduce_paths reads the
    same file through the same code for the PCIe IPC canary.
  - Reads only; the same in check mode. A missing or unreadable file, or one without a positive integer hidden size,
    fails with the path and the reason.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  model_path:
    description: The model directory on the host (absolute), as the server loads it.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Read the model's hidden size
  sglang_model_config:
    model_path: /srv/models/Kimi-K2.5
  register: model
"""

RETURN = r"""
hidden_size:
  description: The model's hidden size.
  returned: success
  type: int
  sample: 7168
config:
  description: The file it was read from.
  returned: success
  type: str
  sample: /srv/models/Kimi-K2.5/config.json
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import model_config
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(argument_spec=dict(model_path=dict(type="path", required=True)),
                           supports_check_mode=True)
    refused = param_checks.refusal("sglang_model_config", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    model_path = module.params["model_path"]
    if not model_path.startswith("/"):
        module.fail_json(msg="sglang_model_config: model_path must be an absolute path, got %r" % model_path)
    try:
        hidden = model_config.read_hidden_size(model_path)
    except model_config.ModelConfigError as exc:
        module.fail_json(msg="sglang_model_config: %s" % exc)
    module.exit_json(changed=False, hidden_size=hidden, config=model_config.config_path(model_path))


if __name__ == "__main__":
    main()
