#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the action plugin sglang_deploy_preflight (it needs the controller's view of the host's
variables, which no module on the host has; all rules live in module_utils/deploy_preflight.py)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_deploy_preflight
short_description: Check every role's inputs for a host at once, before a deploy changes anything
version_added: "0.1.0"
description:
  - Runs on the controller (an action plugin) and changes nothing; on the host it runs only the read-only
    nvidia_gpu_facts module, with C(gpu_preflight_nvidia_smi), for the GPU count (where nvidia-smi cannot be read,
    nothing is compared with the GPUs here; gpu_preflight refuses the host).
  - Names every problem in one message, each with the rule it checks.
  - A variable named with a role's prefix (C(sglang_server_), C(nccl_tuning_), ...) that no role or playbook reads
    is refused, with the closest input of that role (a misspelled name would be ignored and its default hold).
  - C(sglang_server_tp_size) and C(--ep-size) must be positive integers; the tp size at most the GPUs the server
    spans (the host's GPUs times the hosts of C(sglang_server_multinode_group)); the ep size must divide it.
  - The server's model must be able to fit its GPUs where the host holds the size of its weights (the revision's
    record, or a C(path) source's manifest, read by the read-only C(sglang_model_weights) module); the weight files
    divided by the ranks (tp size times I(pp_size)) may not exceed the host's largest GPU's memory, or that memory
    times C(sglang_server_mem_fraction_static) where it is set (SGLang's static pool holds the weights). There is
    no verdict (I(model_fit) says why) for a model not fetched yet, a model path none of C(sglang_model_models), or
    a server that quantizes as it loads (I(quantization)).
  - C(nccl_tuning_settings) and the C(NCCL_*) of C(sglang_install_environment) are checked by name and value as
    nccl_tuning checks them (what needs the installed NCCL is left to that role).
  - Where the benchmark gate runs (tag C(benchmark) selected), the lock of the client's venv must pin the client's
    packages (C(sglang_install_lock) for C(sglang_benchmark_client=host) with the deployed venv's Python,
    C(sglang_benchmark_client_lock) for C(controller)).
  - Returns I(installs), whether this run may install a venv or fetch a model (the fast path's I(comparison)
    says the install, model and code capabilities differ, or nothing was compared), which sizes the free-space check.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  comparison:
    description: The fast path's C(sglang_fast_path_comparison) of the host; none or skipped, I(installs) is true.
    type: raw
  ep_size:
    description: The expert-parallel size the server's extra arguments give (C(--ep-size)); none, not given.
    type: raw
  pp_size:
    description: The pipeline-parallel size the server's extra arguments give (C(--pp-size)); none, 1.
    type: raw
  quantization:
    description: The quantization the server's extra arguments apply as it loads (C(--quantization)); none, none.
    type: raw
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Check every role's inputs before any host changes
  sglang_deploy_preflight:
    comparison: "{{ sglang_fast_path_comparison | default(none) }}"
  register: deploy_preflight
"""

RETURN = r"""
problems: {description: One message per problem found (empty when none)., returned: always, type: list, elements: str}
installs: {description: Whether this run may install a venv or fetch a model., returned: always, type: bool}
installs_why: {description: Why I(installs) is what it is., returned: always, type: str}
model_fit:
  description: What the model's fit was judged on, or why there is no verdict.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(comparison=dict(type="raw"), ep_size=dict(type="raw"), pp_size=dict(type="raw"),
                           quantization=dict(type="raw")),
        supports_check_mode=True,
    )
    module.fail_json(msg="sglang_deploy_preflight runs on the controller (its action plugin): it reads the host's "
                         "variables as the controller sees them, which this module on the host cannot")


if __name__ == "__main__":
    main()
