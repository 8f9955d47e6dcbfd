#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/allreduce_paths.py (all logic lives there)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_allreduce_paths
short_description: Say which all-reduce paths an SGLang venv can run here, and what each needs
version_added: "0.1.0"
description:
  - "Reads the installed sglang and flashinfer-python versions (dist-info) and the source markers that decide each
    all-reduce path, without importing anything: the fusion flag SGLang declares, C(SGLANG_ENABLE_PCIE_IPC_ALLREDUCE)
    and C(SGLANG_PCIE_IPC_MAX_NUMEL) in C(sglang/srt/environ.py), the world sizes in SGLang's and FlashInfer's
    C(pcie_ipc_ar.py), C(PcieIpcAllReduceWorkspace) in C(flashinfer/comm), FlashInfer's one-shot heuristic table,
    and the order of SGLang's all-reduce dispatch."
  - "Paths: C(nccl) (no FlashInfer kernel), C(fusion) (fused allreduce + residual + RMSNorm), C(pcie_ipc)
    (FlashInfer's PCIe IPC all-reduce, FlashInfer >= 0.7.0 with SGLang 0.5.21+), C(fusion+pcie_ipc) (both)."
  - For the requested path (or every path, for C(auto)) says whether it can run with this server's parallelism and
    returns the server arguments and environment it needs, or the reasons it cannot run.
  - "The paths without fusion (C(nccl), C(pcie_ipc)) carry the flag that keeps fusion off where the release declares
    one (C(--enforce-disable-flashinfer-allreduce-fusion), 0.5.14+): SGLang turns fusion on by itself on SM90/SM100
    for the architectures it knows (DeepSeek-V3, Kimi-K2.5, ...) when tp > 1 and no fusion flag is given."
  - Changes nothing on the host; C(changed) is always false.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  venv:
    description: Path of the virtualenv that holds sglang and flashinfer-python.
    type: path
    required: true
  site_packages:
    description: The site-packages directory that holds sglang, when it is not C(venv)/lib/python3*/site-packages.
    type: path
  path:
    description:
      - The all-reduce path asked for. An explicit path that cannot run here fails with the reasons.
      - C(auto) never fails; it lists every runnable candidate (for the benchmark gate to measure) and, until a
        measurement picks one, selects C(fusion) where it can run, else C(nccl).
    type: str
    choices: [auto, nccl, fusion, pcie_ipc, fusion+pcie_ipc]
    default: auto
  tp_size:
    description: The server's tensor-parallel size (all nodes together).
    type: int
    required: true
  ep_size:
    description: Expert-parallel size; 1 < ep_size < tp_size is hybrid EP with MoE-TP, where fusion corrupts output.
    type: int
    default: 1
  nnodes:
    description: Nodes one server spans; both FlashInfer paths are intra-node only.
    type: int
    default: 1
  deterministic:
    description: The server runs with C(--enable-deterministic-inference) (SGLang then keeps PCIe IPC off).
    type: bool
    default: false
  speculative:
    description: Speculative decoding is on (each decode row carries C(speculative_num_draft_tokens) tokens).
    type: bool
    default: false
  speculative_num_draft_tokens:
    description: Draft tokens per request in the verify step.
    type: int
  cuda_graph_max_bs:
    description: >-
      Largest CUDA-graph decode batch. With the draft tokens and the hidden size it sizes
      C(SGLANG_PCIE_IPC_MAX_NUMEL); left unset, SGLang derives the size itself.
    type: int
  hidden_size:
    description: The model's hidden size; read from C(model_path)/config.json when not given.
    type: int
  model_path:
    description:
      - Local model directory whose config.json gives C(hidden_size) (top level or C(text_config)).
      - A directory without config.json (a model not copied yet) leaves the hidden size unknown.
    type: path
  autotune_dir:
    description: Persistent C(FLASHINFER_AUTOTUNE_DIR) for the PCIe IPC tactics. Without one, pcie_ipc is refused (every start would re-tune).
    type: path
  service_user:
    description: The user the server runs as; C(autotune_dir) (or its nearest existing parent) must be writable by it.
    type: str
  environment:
    description: The server's environment; C(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) refuses both IPC paths.
    type: dict
    default: {}
  pcie_ipc_exclusive:
    description:
      - "Add C(--disable-custom-all-reduce) to the PCIe IPC paths where SGLang dispatches its custom all-reduce
        first (0.5.21, 0.5.23): at TP2 it takes every size it fits, and the path measured would not be PCIe IPC."
    type: bool
    default: true
  fusion_unavailable:
    description: A reason, found elsewhere, why fusion cannot run (e.g. the patch is absent).
    type: str
  pcie_ipc_unavailable:
    description: A reason, found elsewhere, why PCIe IPC cannot run.
    type: str
  canary_dir:
    description:
      - "The folder of every kernel's canary record on this host (C(<kernel>-canary.json), the kernel's name with dashes:
        C(fusion-canary.json), C(pcie-ipc-canary.json); written by the sglang_allreduce role's canary tasks). Given,
        each kernel with a canary is held to it: see RV(canaries)."
      - Omitted, no kernel is held to a canary.
    type: path
  canary_gpu:
    description:
      - "The GPUs and driver of this host (the C(gpu_identity) filter of the C(nvidia_gpu) fact: C(gpus), C(driver)),
        part of what every canary verdict is kept for: after a driver upgrade or a GPU change a canary is due again.
        A canary needs one GPU per process of the server's tensor-parallel group: fewer listed here, it cannot run.
        Omitted, they count as unknown."
    type: dict
  canary_version:
    description:
      - "Which canary script proves the kernels (a digest of the sglang_allreduce role's allreduce_canary.py and
        cuda_graph_timer.py), part of what a verdict is kept for: a collection whose canary checks more proves every
        host again. Omitted, it counts as unknown."
    type: str
  canary_tokens:
    description: The verify-step token counts every canary checks (comma-separated), part of the fusion verdict's key.
    type: str
    default: "1,2,4,8,16,32,64,128"
  choice_file:
    description:
      - "The benchmark gate's recorded choice for C(auto) (written by the sglang_allreduce_choice module). C(auto)
        selects the recorded path while the candidates are the ones it was measured among; otherwise (no file, another
        set of candidates, an unreadable record) it selects fusion where it can run, else nccl, and says why."
    type: path
notes:
  - Supports check mode (it only reads).
  - Nothing is imported from the venv; no torch or GPU is needed.
seealso:
  - name: docs/allreduce-paths.md in this repository
    description: The paths, what each needs, the refusals and the NaN hazard of the one-shot kernel.
    link: https://github.com/sgl-project/sglang/pull/34528
"""

EXAMPLES = r"""
- name: Which paths can this host run?
  sglang_allreduce_paths:
    venv: /opt/sglang/current
    tp_size: 8
    speculative: true
    speculative_num_draft_tokens: 4
    cuda_graph_max_bs: 16
    model_path: /srv/models/Kimi-K2.5
    autotune_dir: /var/lib/sglang/flashinfer/autotune
    service_user: sglang
  register: allreduce

- name: Insist on PCIe IPC (fails, naming the reasons, where it cannot run)
  sglang_allreduce_paths:
    venv: /opt/sglang/current
    path: pcie_ipc
    tp_size: 8
    hidden_size: 7168
    autotune_dir: /var/lib/sglang/flashinfer/autotune
    service_user: sglang

- name: Show what the server needs
  ansible.builtin.debug:
    msg: "{{ allreduce.server_args }} {{ allreduce.environment }}"
"""

RETURN = r"""
changed:
  description: Always false.
  returned: always
  type: bool
venv_exists:
  description: Whether C(venv)/bin/python exists. When it does not (a dry run before the install), nothing else is read.
  returned: always
  type: bool
requested:
  description: The path asked for.
  returned: always
  type: str
  sample: auto
path:
  description: The path selected (for C(auto), fusion where it can run, else nccl, until a measurement picks one).
  returned: success
  type: str
  sample: fusion
measured:
  description: For C(auto), whether the path is the benchmark gate's recorded choice (false before a measurement).
  returned: when path is auto
  type: bool
why:
  description: Why this path was selected.
  returned: success
  type: str
server_args:
  description:
    - Server arguments the selected path needs; on a path without fusion, the flag that keeps it off where the
      release declares one.
  returned: success
  type: list
  elements: str
  sample: ["--flashinfer-allreduce-fusion-backend", "trtllm"]
environment:
  description: Environment the selected path needs (C(SGLANG_ENABLE_PCIE_IPC_ALLREDUCE) is set to 0 or 1 wherever the release reads it).
  returned: success
  type: dict
  sample: {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "FLASHINFER_AUTOTUNE_DIR": "/var/lib/sglang/flashinfer/autotune",
           "SGLANG_PCIE_IPC_MAX_NUMEL": "458752"}
notes:
  description: What else to know about the selected path (workspace sizing, dispatch order).
  returned: success
  type: list
  elements: str
candidates:
  description: Every path that can run here, most ambitious first (what the benchmark gate may measure).
  returned: always
  type: list
  elements: str
  sample: ["fusion+pcie_ipc", "pcie_ipc", "fusion", "nccl"]
refused:
  description: Each path that cannot run here, with its reasons.
  returned: always
  type: dict
  sample: {"pcie_ipc": ["flashinfer-python 0.6.18 is older than 0.7.0: it has no PcieIpcAllReduceWorkspace, ..."]}
paths:
  description: Per path, C(runnable), C(reasons), C(server_args), C(environment) and C(notes).
  returned: always
  type: dict
facts:
  description: What was read from the venv (versions and source markers).
  returned: always
  type: dict
  sample: {"sglang_version": "0.5.23", "flashinfer_version": "0.7.2", "sglang_pcie_ipc_switch": true,
           "flashinfer_pcie_ipc": true, "flashinfer_pcie_ipc_world_sizes": [2, 4, 8]}
canaries:
  description:
    - "Per kernel with a canary, when O(canary_dir) is given, where it stands with its canary. A result measured
      for this server (RV(canaries.key)) that failed, or a canary that cannot run (the hidden size unknown, fewer
      GPUs than the server's tensor-parallel group), refuses every path that names the kernel with the reason; none
      for this server leaves them runnable with C(due) (run the canary, then ask again)."
  returned: when O(canary_dir) is given
  type: dict
  contains:
    state:
      description: C(passed), C(failed), C(due), C(cannot_run) or C(not_needed) (the kernel cannot run here anyway).
      type: str
      sample: due
    why:
      description: Why, in one line.
      type: str
      sample: none recorded
    key:
      description: What a result must have been measured for (null where the kernel cannot run anyway).
      type: dict
      sample: {"venv": "/opt/sglang/venvs/0.5.23-abc", "world_size": 8, "hidden": 7168, "max_numel": 458752,
               "max_batch": 16, "draft_tokens": 4,
               "gpu": {"gpus": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"], "driver": "580.65.06"},
               "canary": "0123456789abcdef"}
    summary:
      description: The recorded result's summary line, where one is recorded for this server.
      type: str
    record:
      description: The recorded result for this server (its figures), where there is one.
      type: dict
    file:
      description: The record's path (where the kernel can run here).
      type: str
    gpus:
      description: The canary's processes, one per GPU (the server's tensor-parallel size).
      type: int
    argv:
      description: The canary script's arguments before C(--out).
      type: list
      elements: str
    environment:
      description: The environment the kernel runs in on the server (the canary runs in it too).
      type: dict
msg:
  description: One line saying what was decided, or why the requested path cannot run.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import allreduce_paths as ap
from ansible.module_utils import atomic_files
from ansible.module_utils import fusion_patcher
from ansible.module_utils import model_config
from ansible.module_utils import param_checks


def _read_record(path):
    """A record's text (the choice, a kernel's canary); None when there is none, and an unreadable one says so
    (decide reports it as such)."""
    if not path:
        return None
    try:
        return atomic_files.read_record(path)
    except atomic_files.RecordError as exc:
        return "unreadable: %s" % exc


def run(params):
    """(result, None), or (None, failure fields) with the reason in msg."""
    try:
        venv = fusion_patcher.Venv(params["venv"], params["site_packages"])
    except fusion_patcher.PatchRefused as exc:
        return None, {"msg": exc.msg}
    setup = dict((name, params[name]) for name in (
        "tp_size", "ep_size", "nnodes", "deterministic", "speculative", "speculative_num_draft_tokens",
        "cuda_graph_max_bs", "hidden_size", "autotune_dir", "environment", "pcie_ipc_exclusive")
        + tuple(ap.unavailable_param(name) for name in ap.KERNELS))
    # A model not copied yet leaves the hidden size unknown (the canary then cannot run); a broken config fails.
    if setup["hidden_size"] is None and params["model_path"] \
            and os.path.exists(model_config.config_path(params["model_path"])):
        try:
            setup["hidden_size"] = model_config.read_hidden_size(params["model_path"])
        except model_config.ModelConfigError as exc:
            return None, {"msg": str(exc)}
    try:
        if setup["autotune_dir"] and params["service_user"]:
            setup["autotune_dir_problem"] = ap.writable_problem(setup["autotune_dir"], params["service_user"])
        recorded = _read_record(params["choice_file"]) if params["path"] == "auto" else None
        records = dict((name, {"path": path, "text": _read_record(path)})
                       for name, path in (ap.canary_records(params["canary_dir"]) if params["canary_dir"] else []))
        context = {"venv_real": os.path.realpath(params["venv"]), "gpu": params["canary_gpu"],
                   "version": params["canary_version"], "tokens": params["canary_tokens"], "records": records}
        return ap.decide_with_canaries(params["path"], ap.read_facts(venv.site_packages), setup, recorded,
                                       context if records else None), None
    except ap.PathsError as exc:
        kept = ("facts", "candidates", "refused", "paths", "canaries")
        failure = dict((key, exc.result[key]) for key in kept if key in exc.result)
        failure["msg"] = exc.msg
        return None, failure


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            site_packages=dict(type="path"),
            path=dict(type="str", choices=list(ap.REQUESTS), default="auto"),
            tp_size=dict(type="int", required=True),
            ep_size=dict(type="int", default=1),
            nnodes=dict(type="int", default=1),
            deterministic=dict(type="bool", default=False),
            speculative=dict(type="bool", default=False),
            speculative_num_draft_tokens=dict(type="int", no_log=False),
            cuda_graph_max_bs=dict(type="int"),
            hidden_size=dict(type="int"),
            model_path=dict(type="path"),
            autotune_dir=dict(type="path"),
            service_user=dict(type="str"),
            environment=dict(type="dict", default={}),
            pcie_ipc_exclusive=dict(type="bool", default=True),
            canary_gpu=dict(type="dict"),
            canary_version=dict(type="str"),
            canary_tokens=dict(type="str", default="1,2,4,8,16,32,64,128", no_log=False),
            choice_file=dict(type="path"),
            canary_dir=dict(type="path"),
            # per kernel: a reason found elsewhere why it cannot run
            **dict((ap.unavailable_param(name), dict(type="str")) for name in ap.KERNELS)
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_allreduce_paths", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    if not os.path.exists(os.path.join(params["venv"], "bin", "python")):
        module.exit_json(changed=False, venv_exists=False, msg="%s/bin/python does not exist" % params["venv"])
    result, failure = run(params)
    if failure:  # reported outside the except clause: a refusal is an answer, not a traceback
        module.fail_json(changed=False, requested=params["path"], **failure)
    result["msg"] = "%s: %s (%s); runnable here: %s" % (
        result["requested"], result["path"], result["why"], ", ".join(result["candidates"]))
    module.exit_json(changed=False, venv_exists=True, **result)


if __name__ == "__main__":
    main()
