#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/fusion_patcher.py (all logic lives there)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_fusion_patch
short_description: Admit SM120 GPUs to SGLang's FlashInfer allreduce fusion, safely and reversibly
version_added: "0.1.0"
description:
  - SGLang only lets FlashInfer's fused allreduce + residual + RMSNorm kernel run on SM90 and SM100 GPUs.
    This module adds SM120 (RTX PRO 6000 Blackwell, compute capability 12.x) to every gate that blocks it in
    an installed SGLang, in the venv that holds it.
  - "G1: the runtime architecture guard (C(communicator.py) up to 0.5.19, C(layer_boundary/residual/add_norm.py)
    from 0.5.21). G2: the backend check in C(_resolve_backend) (0.5.14+). G3: the workspace preflight that votes
    fusion off when the multicast granularity query fails (PCIe systems have no multicast; optional)."
  - Sites are found by code structure (Python AST), for SGLang 0.5.4 through 0.5.23, whatever the formatting,
    operand order or name form (C(_is_sm90_supported), C(is_sm90_supported()), C(get_platform().is_sm90)). The
    SM120 operand reuses names that exist in that file, adding the import or module flag it needs.
  - Refuses, writing nothing, when flashinfer-python is missing or older than 0.6.17 (older releases build an
    empty kernel on SM120 that returns garbage), when sglang is missing, when a layout is not recognised, or when
    a file cannot be written.
  - Several files change together or not at all; each new file must compile first; stale bytecode is removed.
    The exact pre-patch bytes are kept under I(state_dir) so O(state=absent) restores them byte for byte.
  - Writes nothing through a symlink below the venv (or below O(site_packages) when given). A symlinked directory
    on the way to a guard file or to the module's record, or a symlinked guard file, is refused naming the link,
    in check mode too. A symlinked guard file is never patched, so it never becomes a regular file.
  - A guard file that changes between the module's read and its rename (another process editing it) is not
    overwritten. The run fails naming the file, files already replaced get their old bytes back, nothing is
    recorded.
  - Versions are read from the venv's package metadata; nothing is imported, so no torch or GPU is needed.
  - In every state it also reports the server flags this sglang declares for fusion on (RV(server_flag)) and for
    fusion kept off (RV(server_no_fusion_flag)).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  venv:
    description: Path of the virtualenv that holds sglang.
    type: path
    required: true
  state:
    description:
      - C(present) admits SM120 at every gate; sites that already admit it (this module, a hand-applied C(sed),
        or a future SGLang release) are left alone and reported.
      - C(absent) restores each file this module changed to its exact pre-patch bytes, but only where the file
        still holds exactly what this module wrote; foreign edits are left alone and reported.
    type: str
    choices: [present, absent]
    default: present
  backup:
    description: Also leave a timestamped copy next to each file before changing it.
    type: bool
    default: false
  min_flashinfer_version:
    description:
      - Lowest flashinfer-python version the patch accepts in the venv. Can be raised, never lowered below
        0.6.17, the first release whose trtllm allreduce kernels are built for SM12x.
    type: str
    default: "0.6.17"
  workspace_preflight:
    description:
      - Also patch G3, where present (0.5.12.post1+), so a failed C(cuMulticastGetGranularity) query on a
        non-multicast (PCIe) system falls back to the allocation granularity instead of turning fusion off.
        The trtllm workspace is unicast, so it never needed multicast.
    type: bool
    default: true
  site_packages:
    description: The site-packages directory that holds sglang, when it is not C(venv)/lib/python3*/site-packages.
    type: path
notes:
  - Supports check mode and diff mode (one unified diff per file that would change).
  - The module keeps its records in C(venv)/.sglang-fusion-patch/; a reinstall of sglang that overwrites a patched
    file is detected on the next run (C(present) patches again, C(absent) has nothing to do).
  - Running the module with the venv's own Python (C(ansible_python_interpreter)) lets new files be
    compile-checked by the interpreter that will load them; otherwise the venv's C(bin/python) is used for that.
seealso:
  - name: SGLang issue 15650 (trtllm_comm has no SM12x build)
    description: Why SGLang keeps the fused allreduce+RMSNorm kernel from SM120.
    link: https://github.com/sgl-project/sglang/issues/15650
"""

EXAMPLES = r"""
- name: Admit SM120 to FlashInfer allreduce fusion
  sglang_fusion_patch:
    venv: /opt/sglang/current
  register: fusion

- name: Start the server with the flag this SGLang understands
  ansible.builtin.debug:
    msg: "python -m sglang.launch_server ... {{ fusion.server_flag | join(' ') }}"

- name: See what would change, with diffs, changing nothing
  sglang_fusion_patch:
    venv: /opt/sglang/current
  check_mode: true
  diff: true

- name: Require a newer FlashInfer than the floor
  sglang_fusion_patch:
    venv: /opt/sglang/current
    min_flashinfer_version: "0.6.18"
    backup: true

- name: Roll back to the exact original files
  sglang_fusion_patch:
    venv: /opt/sglang/current
    state: absent
  register: unfused

- name: Start the server without fusion (SGLang would otherwise turn it on by itself on SM90/SM100)
  ansible.builtin.debug:
    msg: "python -m sglang.launch_server ... {{ unfused.server_no_fusion_flag | join(' ') }}"
"""

RETURN = r"""
changed:
  description: Whether any file was (or in check mode would be) written.
  returned: always
  type: bool
sglang_version:
  description: sglang version from the venv's package metadata.
  returned: when sglang is found
  type: str
  sample: "0.5.21"
flashinfer_version:
  description: flashinfer-python version from the venv's package metadata, or null.
  returned: when sglang is found
  type: str
  sample: "0.6.18"
layout:
  description: The guard layout found, as file:function plus the extra gates present.
  returned: state=present
  type: str
  sample: "add_norm:apply_flashinfer_allreduce_fusion+backend+preflight"
sites:
  description: Each gate found.
  returned: state=present
  type: list
  elements: dict
  contains:
    gate: {description: "G1, G2 or G3.", type: str}
    file: {description: Path relative to site-packages., type: str}
    function: {description: Function that holds the gate., type: str}
    line: {description: Line of the gate before patching., type: int}
    before: {description: The gate expression as found., type: str}
    after: {description: The gate expression after patching., type: str}
    status: {description: "patched, would_patch, patch or already_admitted.", type: str}
files:
  description: Each guard file, with sha256 before and after.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/opt/sglang/current/lib/python3.11/site-packages/sglang/srt/layers/communicator.py",
            "sha256_before": "9f...", "sha256_after": "4c...", "changed": true}]
backup_files:
  description: Timestamped copies left next to the files (only with O(backup=true)).
  returned: always
  type: list
  elements: str
server_flag:
  description: >-
    Command-line arguments that turn fusion on for this sglang, read from its own argument definitions:
    C(["--flashinfer-allreduce-fusion-backend", "trtllm"]) from 0.5.14, C(["--enable-flashinfer-allreduce-fusion"])
    before.
  returned: when sglang is found
  type: list
  elements: str
server_no_fusion_flag:
  description:
    - Command-line arguments that keep fusion off for this sglang, read from its own argument definitions, in
      every state (also where the patch is absent or fusion is not allowed on the host);
      C(["--enforce-disable-flashinfer-allreduce-fusion"]) from 0.5.14, C([]) before (those releases declare no
      such flag).
    - SGLang turns fusion on by itself on SM90/SM100 GPUs for the architectures it knows (DeepSeek-V3, Kimi-K2.5,
      ...) when tp > 1 and no fusion flag is given; only this flag overrides that. A server meant to run without
      fusion passes it.
  returned: when sglang is found
  type: list
  elements: str
  sample: ["--enforce-disable-flashinfer-allreduce-fusion"]
foreign_files:
  description: Files this module once patched that something else changed since; left alone.
  returned: state=absent
  type: list
  elements: str
state_file:
  description: Where this module keeps its record for the venv.
  returned: when sglang is found
  type: str
msg:
  description: What happened, or why nothing was done.
  returned: always
  type: str
"""

import os
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import atomic_files
from ansible.module_utils import fusion_patcher
from ansible.module_utils import param_checks


def compile_with(python):
    """Compile-check new bytes with the venv's interpreter, the one that will load them."""
    def check(path, data):
        proc = subprocess.run(
            [python, "-I", "-c", "import sys; compile(sys.stdin.buffer.read(), sys.argv[1], 'exec', "
             "dont_inherit=True)", path], input=data, capture_output=True, check=False)
        if proc.returncode != 0:
            raise SyntaxError(proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1])
    return check


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            backup=dict(type="bool", default=False),
            min_flashinfer_version=dict(type="str", default=fusion_patcher.MIN_FLASHINFER),
            workspace_preflight=dict(type="bool", default=True),
            site_packages=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_fusion_patch", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    try:
        if params["state"] == "absent":
            result = fusion_patcher.revert(params["venv"], check_mode=module.check_mode,
                                           site_packages=params["site_packages"])
        else:
            venv_python = os.path.join(params["venv"], "bin", "python")
            checker = compile_with(venv_python) if os.access(venv_python, os.X_OK) \
                else fusion_patcher.compile_in_process
            result = fusion_patcher.apply(
                params["venv"], min_flashinfer=params["min_flashinfer_version"],
                workspace_preflight=params["workspace_preflight"], backup=params["backup"],
                check_mode=module.check_mode, compile_check=checker, backup_local=module.backup_local,
                site_packages=params["site_packages"])
    except fusion_patcher.PatchRefused as exc:
        exc.result.pop("diff", None)
        exc.result["changed"] = False
        module.fail_json(msg=exc.msg, **exc.result)
    except atomic_files.TransactionError as exc:
        module.fail_json(msg=str(exc), changed=False)
    except ValueError as exc:  # e.g. an unparsable min_flashinfer_version
        module.fail_json(msg=str(exc), changed=False)
    except OSError as exc:
        where = getattr(exc, "filename", None) or params["venv"]
        module.fail_json(msg="sglang_fusion_patch: %s: %s" % (where, exc.strerror or exc), changed=False)

    diff = result.pop("diff", [])
    for warning in result.pop("warnings", []):
        module.warn(warning)
    if module._diff and diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
