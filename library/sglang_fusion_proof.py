#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/fusion_proof.py and fused_architectures.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_fusion_proof
short_description: Prove a started SGLang server serves what its unit starts and runs the fused all-reduce kernel
version_added: "0.1.0"
description:
  - Compares the served arguments (O(served), from C(/server_info)) with the unit's C(ExecStart) (tp size, model,
    speculative algorithm, fusion backend).
  - Where the unit passes a fusion flag to more than one rank (and not C(--enforce-disable-flashinfer-allreduce-fusion)),
    fails with its own message for each way the server runs unfused, from this start's log (O(log_lines)) - skipped by
    SGLang's workspace preflight vote (the probe's reason quoted), workspace creation failed, no fusion API in this
    FlashInfer, fusion forcibly disabled, data-parallel attention, a model whose architecture never calls the fused
    kernel, or a release whose own gates never set the fused path up (no "enabled" line and no skip line, so the patch
    is probably not applied).
  - The architecture is the first of C(architectures) in the served model's C(config.json). Which architectures call
    the kernel is read from the source of the SGLang the unit runs (C(ExecStart)'s interpreter, its venv's
    site-packages), statically, following each model module's C(EntryClass) through the classes and imports down to
    a call of C(forward_with_allreduce_fusion) (C(LayerCommunicator) up to 0.5.19, C(layer_boundary) from 0.5.21).
  - With O(api_log), also counts C(allreduce_fusion) calls in FlashInfer's API log (C(FLASHINFER_LOGLEVEL=1),
    C(FLASHINFER_LOGDEST) in the server's environment) and requires at least one.
  - What it cannot know - a kernel call inside a captured CUDA graph logs nothing (replays call no Python), so without
    the API log the proof infers the kernel runs from the release's code and the start's log; that the kernel's
    output is right is the fusion canary's and the benchmark gate's to judge.
  - Reads only; the same in check mode.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  unit_file:
    description: The unit that was started; its (last) C(ExecStart=) line is what the server was asked to run.
    type: path
    required: true
  log_lines:
    description: This start's log lines, with the API key already taken out (the role's journal_excerpt.py).
    type: list
    elements: str
    required: true
  served:
    description:
      - The served arguments, from C(/server_info) - C(tp_size), C(model_path), C(speculative_algorithm),
        C(flashinfer_allreduce_fusion_backend). Pass these keys only - the whole answer holds the API key.
    type: dict
    required: true
  require_fusion_log:
    description:
      - Fail a start whose log shows neither the fused path set up nor a reason it was skipped. Lines saying fusion was
        skipped or failed, and a model that never calls the kernel, fail whatever this says.
    type: bool
    default: true
  api_log:
    description:
      - FlashInfer's API log, a path or a glob (C(%i), FlashInfer's process id, stands for any). Empty - calls are not
        counted.
    type: str
    default: ""
  server_pid:
    description: The server's main process; API log files last written before it started are not counted (0 - all).
    type: int
    default: 0
  site_packages:
    description: Where the served SGLang's C(sglang/) lies, when not in the site-packages of C(ExecStart)'s venv.
    type: path
  service:
    description: The unit's name, for the messages.
    type: str
    default: ""
notes:
  - Reads the unit, the model's C(config.json), the served release's C(sglang/srt/layers) and C(sglang/srt/models)
    (a few seconds of one core, only when fusion is judged) and the API log files; writes nothing.
"""

EXAMPLES = r"""
- name: Read the served arguments
  ansible.builtin.uri:
    url: http://127.0.0.1:30000/server_info
    return_content: true
  register: info

- name: Prove the start
  sglang_fusion_proof:
    unit_file: /etc/systemd/system/sglang.service
    log_lines: "{{ journal.stdout_lines }}"
    served: "{{ info.json | dict2items | selectattr('key', 'in', ['tp_size', 'model_path', 'speculative_algorithm',
              'flashinfer_allreduce_fusion_backend']) | items2dict }}"
    api_log: /var/lib/sglang/flashinfer-api/fi-%i.log
"""

RETURN = r"""
passed:
  description: Whether the start is proven (the module fails otherwise).
  returned: always
  type: bool
msg:
  description: What was proven, or every reason it was not.
  returned: always
  type: str
reasons:
  description:
    - Each reason the proof fails, with its code - served_tp_size, served_model_path, served_speculative_algorithm,
      served_fusion_backend, preflight_skipped, workspace_failed, flashinfer_unavailable, forced_off, dp_attention,
      architecture_unknown, architecture_unfused, not_set_up, enabled_backend, api_log_missing, api_log_no_calls.
  returned: always
  type: list
  elements: dict
  sample: [{"code": "preflight_skipped", "message": "SGLang's workspace preflight vote skipped fusion: ..."}]
fusion_expected:
  description: Whether the unit passes a fusion flag to more than one rank (only then is fusion judged).
  returned: always
  type: bool
architecture:
  description: The served model's architecture (first of C(architectures) in its config.json).
  returned: when fusion is expected
  type: str
  sample: KimiK25ForConditionalGeneration
route:
  description: How that architecture reaches the fused kernel, definition by definition ("module:name").
  returned: when fusion is expected and the architecture calls the kernel
  type: list
  elements: str
sglang_version:
  description: The served release.
  returned: when fusion is expected and it was found
  type: str
fused_architectures:
  description: The architectures whose layers call the fused kernel in the served release.
  returned: when fusion is expected and the release was read
  type: list
  elements: str
evidence:
  description: What the log and the API log showed (ranks and backends set up, API call counts).
  returned: always
  type: dict
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import fused_architectures as fa
from ansible.module_utils import fusion_proof as fp
from ansible.module_utils import model_config
from ansible.module_utils import pkg_versions as pv
from ansible.module_utils import param_checks

SERVED_KEYS = ("tp_size", "model_path", "speculative_algorithm", "flashinfer_allreduce_fusion_backend")


def sglang_site(exec_args, site_packages):
    """(site-packages holding sglang/, problem): the given one, else the venv of ExecStart's interpreter."""
    if site_packages:
        if os.path.isdir(os.path.join(site_packages, "sglang")):
            return site_packages, None
        return None, "no sglang/ package in %s (site_packages)" % site_packages
    interpreter = exec_args[0] if exec_args else ""
    venv = os.path.dirname(os.path.dirname(interpreter)) if os.path.isabs(interpreter) else ""
    candidates = pv.site_packages_dirs(venv) if venv else []
    for path in candidates:
        if os.path.isdir(os.path.join(path, "sglang")):
            return path, None
    return None, "cannot find the sglang the unit runs: no sglang/ package in the site-packages of %s's venv (%s)" % (
        interpreter or "ExecStart's interpreter", ", ".join(candidates) or "none found")


def process_start(pid):
    """Epoch seconds the process started (from /proc), or None."""
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
            start_ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="utf-8") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime "))
        return boot + start_ticks / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def api_calls(pattern, server_pid):
    """{"files", "calls", "where"} from the API log files matching PATTERN written since the server started."""
    where = pattern.replace("%i", "*")
    since = process_start(server_pid) if server_pid else None
    files, calls = 0, {}
    for path in sorted(glob.glob(where)):
        try:
            if since is not None and os.path.getmtime(path) < since:
                continue
            with open(path, "r", encoding="utf-8", errors="replace") as handle:
                for name, count in fp.count_api_calls(handle).items():
                    calls[name] = calls.get(name, 0) + count
            files += 1
        except OSError:
            continue
    return {"files": files, "calls": calls, "where": where + (" (since pid %d started)" % server_pid
                                                              if since is not None else "")}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit_file=dict(type="path", required=True),
            log_lines=dict(type="list", elements="str", required=True),
            served=dict(type="dict", required=True),
            require_fusion_log=dict(type="bool", default=True),
            api_log=dict(type="str", default=""),
            server_pid=dict(type="int", default=0),
            site_packages=dict(type="path"),
            service=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_fusion_proof", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    who = "%s: " % params["service"] if params["service"] else ""
    unknown = sorted(set(params["served"]) - set(SERVED_KEYS))
    if unknown:
        module.fail_json(msg="%ssglang_fusion_proof: served takes only %s, got also %s (the whole /server_info holds "
                         "the API key)" % (who, ", ".join(SERVED_KEYS), ", ".join(unknown)))
    try:
        with open(params["unit_file"], "r", encoding="utf-8", errors="replace") as handle:
            exec_args = fp.exec_start_args(handle.read())
        unit = fp.unit_settings(exec_args)
    except OSError as exc:
        module.fail_json(msg="%ssglang_fusion_proof: cannot read the unit %s: %s" % (who, params["unit_file"], exc))
    except fp.ProofInputError as exc:
        module.fail_json(msg="%ssglang_fusion_proof: %s: %s" % (who, params["unit_file"], exc))

    result = {}
    architecture = fused = None
    problem = release = ""
    if fp.fusion_expected(unit)[0]:
        try:
            architecture = model_config.read_architecture(unit["model_path"])
        except model_config.ModelConfigError as exc:
            problem = str(exc)
        site, site_problem = sglang_site(exec_args, params["site_packages"])
        if site:
            version = pv.find_distribution(pv.installed_versions(site), "sglang")
            release = "sglang %s" % version if version else "the sglang in %s" % site
            analysis = fa.analyse(fa.read_sources(site))
            fused = sorted(analysis["fused"])
            result.update(sglang_version=version, fused_architectures=fused,
                          route=analysis["fused"].get(architecture, []))
        else:
            problem = "; ".join(p for p in (problem, site_problem) if p)
        result["architecture"] = architecture
    calls = api_calls(params["api_log"], params["server_pid"]) if params["api_log"] else None
    verdict = fp.judge(params["log_lines"], exec_args, params["served"], architecture=architecture,
                       fused_architectures=fused, api_calls=calls, require_fusion_log=params["require_fusion_log"],
                       architecture_problem=problem or None, release=release)
    result.update(changed=False, passed=verdict["passed"], reasons=verdict["reasons"],
                  fusion_expected=verdict["fusion_expected"], evidence=verdict["evidence"], msg=who + verdict["msg"])
    if not verdict["passed"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
