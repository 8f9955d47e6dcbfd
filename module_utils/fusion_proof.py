# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Does a started SGLang server serve what its unit starts, and run the fused all-reduce + RMSNorm kernel?

The judgement after each start (the sglang_fusion_proof module, sglang_server's `prove`), from what can be read
then: the unit's ExecStart, /server_info, this start's log, the served model's architecture with the list of
architectures whose layers call the kernel in the release the unit runs (module_utils/fused_architectures.py), and,
when the operator turned it on, FlashInfer's API log. Pure: lines, arguments and dictionaries in, a verdict out.

What it can know: whether SGLang set the fused path up (its "enabled" line, printed before CUDA-graph capture for
every model), each way SGLang logs turning it off, whether the model's layers can call the kernel at all (from the
release's code), and, with FlashInfer's API log, how many times Python called it. What it cannot know: that the
kernel runs inside the captured CUDA graphs (a graph replay calls no Python, so no log line), or that its output is
right (the canary and the benchmark gate's correctness check judge that).
"""
from __future__ import annotations

import re
import shlex

ON_FLAGS = ("--flashinfer-allreduce-fusion-backend", "--enable-flashinfer-allreduce-fusion")
OFF_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"
TP_FLAGS = ("--tp-size", "--tensor-parallel-size")
# The FlashInfer API whose calls show the kernel ran, and the one that builds its workspace.
KERNEL_API = "allreduce_fusion"
WORKSPACE_API = "create_allreduce_fusion_workspace"

# SGLang's own lines (sglang/srt/layers/flashinfer_comm_fusion.py, 0.5.14 to 0.5.23; 0.5.4-0.5.9 the older
# "workspace initialized for rank" line).
ENABLED = re.compile(r"FlashInfer AllReduce Fusion enabled and workspace initialized: backend=([^,\s]+)"
                     r"|FlashInfer workspace initialized for rank (\d+)")
PROBE_FAILED = re.compile(r"FlashInfer workspace preflight probe failed \((.*)\)\. Skipping allreduce fusion")
VOTE_SKIPPED = re.compile(r"FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank\. "
                          r"Skipping allreduce fusion")
WORKSPACE_FAILED = re.compile(r"Failed to initialize FlashInfer workspace \(backend=([^)]*)\): (.*?)\.? "
                              r"Disabling flashinfer allreduce fusion permanently")
DISABLED_GLOBALLY = re.compile(r"FlashInfer allreduce fusion disabled globally because workspace initialization "
                               r"failed on at least one rank")
UNAVAILABLE = re.compile(r"(flashinfer\.comm (?:unified )?allreduce_fusion API is not available.*?|"
                         r"FlashInfer comm not available, skipping workspace initialization)\s*$")
FORCED_OFF = re.compile(r"FlashInfer allreduce fusion is forcibly disabled")
RANK = re.compile(r"^\[[^\]]*?\bTP(\d+)[^\]]*\]")
API_CALL = re.compile(r"FlashInfer API Call: ([A-Za-z_][\w.]*)")


class ProofInputError(ValueError):
    """Input the proof cannot judge from (a unit without ExecStart); the message says what and where."""


# ------------------------------------------------------------------------------------------------ the unit

def exec_start_args(unit_text):
    """The argument list of a unit's (last) ExecStart= line, systemd's prefixes (-, @, +, !) taken off."""
    lines = [line.split("=", 1)[1] for line in unit_text.splitlines() if line.startswith("ExecStart=")]
    if not lines or not lines[-1].strip():
        raise ProofInputError("the unit has no ExecStart= line")
    value = lines[-1].strip().lstrip("-@+!")
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise ProofInputError("the unit's ExecStart= cannot be split into arguments: %s" % exc)


def flag_value(args, flags):
    """The last value given to any of ``flags`` (``--flag value`` or ``--flag=value``), as argparse keeps it; ''
    for a flag given without a value; None when absent."""
    found = None
    for index, arg in enumerate(args):
        for flag in flags:
            if arg == flag:
                following = args[index + 1] if index + 1 < len(args) else ""
                found = "" if following.startswith("--") else following
            elif arg.startswith(flag + "="):
                found = arg[len(flag) + 1:]
    return found


def unit_settings(args):
    """What the unit asks for: tp size, model, speculation, and the fusion flags."""
    tp = flag_value(args, TP_FLAGS)
    try:
        tp_size = int(tp) if tp else 1
    except ValueError:
        raise ProofInputError("the unit's --tp-size is not a whole number: %r" % tp)
    backend = flag_value(args, (ON_FLAGS[0],))
    enable = flag_value(args, (ON_FLAGS[1],)) is not None
    return {
        "tp_size": tp_size,
        "model_path": flag_value(args, ("--model-path", "--model")) or "",
        "speculative_algorithm": flag_value(args, ("--speculative-algorithm",)) or "",
        "fusion_backend": backend or "",
        "fusion_flag": ON_FLAGS[0] if backend else (ON_FLAGS[1] if enable else ""),
        "fusion_off": flag_value(args, (OFF_FLAG,)) is not None,
        "dp_attention": flag_value(args, ("--enable-dp-attention",)) is not None,
    }


# ------------------------------------------------------------------------------------------------- the log

def _rank(line):
    match = RANK.search(line)
    return "TP" + match.group(1) if match else None


def read_log(lines):
    """What this start's log says about fusion: per kind of line, [(rank or None, details)]."""
    seen = {"enabled": [], "probe_failed": [], "vote_skipped": [], "workspace_failed": [], "disabled_globally": [],
            "unavailable": [], "forced_off": []}
    for line in lines:
        if "FlashInfer" not in line and "flashinfer" not in line:
            continue
        rank = _rank(line)
        match = ENABLED.search(line)
        if match:
            seen["enabled"].append((rank or ("TP" + match.group(2) if match.group(2) else None),
                                    match.group(1) or ""))
            continue
        for kind, pattern in (("probe_failed", PROBE_FAILED), ("workspace_failed", WORKSPACE_FAILED),
                              ("vote_skipped", VOTE_SKIPPED), ("disabled_globally", DISABLED_GLOBALLY),
                              ("unavailable", UNAVAILABLE), ("forced_off", FORCED_OFF)):
            match = pattern.search(line)
            if match:
                seen[kind].append((rank, match.groups()))
                break
    return seen


def count_api_calls(lines):
    """{API name: calls} from FlashInfer's API log at FLASHINFER_LOGLEVEL >= 1 ("... FlashInfer API Call: NAME")."""
    calls = {}
    for line in lines:
        match = API_CALL.search(line)
        if match:
            calls[match.group(1)] = calls.get(match.group(1), 0) + 1
    return calls


def _ranks(entries):
    ranks = sorted({entry[0] for entry in entries if entry[0]}, key=lambda r: int(r[2:]))
    return (" on " + ", ".join(ranks)) if ranks else ""


def _first_distinct(values, most=2):
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out[:most]


# ----------------------------------------------------------------------------------------------- the verdict

def _served_reasons(unit, served):
    reasons = []
    tp = served.get("tp_size")
    try:
        tp_ok = int(tp) == unit["tp_size"]
    except (TypeError, ValueError):
        tp_ok = False
    if not tp_ok:
        reasons.append(("served_tp_size", "it serves tp_size=%s, its unit starts %d" % (tp, unit["tp_size"])))
    if served.get("model_path") != unit["model_path"]:
        reasons.append(("served_model_path", "it serves model_path=%s, its unit starts %s"
                        % (served.get("model_path"), unit["model_path"] or "none")))
    if unit["speculative_algorithm"] and served.get("speculative_algorithm") != unit["speculative_algorithm"]:
        reasons.append(("served_speculative_algorithm", "it serves speculative_algorithm=%s, its unit starts %s"
                        % (served.get("speculative_algorithm"), unit["speculative_algorithm"])))
    return reasons


def fusion_expected(unit):
    """(expected, why not): fusion can only be judged where a fusion flag reaches more than one rank."""
    if not unit["fusion_flag"]:
        return False, "the unit passes no fusion flag"
    if unit["fusion_off"]:
        return False, "the unit keeps fusion off (%s)" % OFF_FLAG
    if unit["tp_size"] < 2:
        return False, "tp_size %d: fusion needs tensor parallelism (more than one rank)" % unit["tp_size"]
    return True, ""


def _off_reasons(seen):
    """SGLang's own lines that turned fusion off at start-up, one reason per way."""
    reasons = []
    if seen["probe_failed"] or seen["vote_skipped"]:
        why = _first_distinct([entry[1][0] for entry in seen["probe_failed"]])
        if why:
            text = ('SGLang\'s workspace preflight vote skipped fusion: "FlashInfer workspace preflight probe failed '
                    '(%s)"%s, and the ranks voted it off' % (" | ".join(why), _ranks(seen["probe_failed"])))
            if any("cuMulticastGetGranularity" in reason for reason in why):
                text += ("; a GPU without multicast (PCIe) fails that query, which the fusion patch's G3 part "
                         "(fusion_patch_workspace_preflight) takes out of the venv the server runs")
        else:
            text = ('SGLang\'s workspace preflight vote skipped fusion: "cuMemCreate probe failed on at least one '
                    'rank"%s; the failing rank logged its reason in its own log' % _ranks(seen["vote_skipped"]))
        reasons.append(("preflight_skipped", text))
    if seen["workspace_failed"] or seen["disabled_globally"]:
        failed = _first_distinct(["backend=%s: %s" % entry[1] for entry in seen["workspace_failed"]])
        if failed:
            text = ('FlashInfer\'s fusion workspace could not be created ("Failed to initialize FlashInfer workspace '
                    '(%s)"%s) and SGLang disabled fusion permanently' % (" | ".join(failed),
                                                                         _ranks(seen["workspace_failed"])))
        else:
            text = ("SGLang disabled fusion globally: another rank's FlashInfer workspace could not be created "
                    "(its reason is in that rank's log)")
        reasons.append(("workspace_failed", text))
    if seen["unavailable"]:
        text = seen["unavailable"][0][1][0]
        reasons.append(("flashinfer_unavailable", 'this FlashInfer offers SGLang no fusion API ("%s"), so fusion '
                        'falls back to the plain all-reduce' % text))
    if seen["forced_off"]:
        reasons.append(("forced_off", 'SGLang logged "FlashInfer allreduce fusion is forcibly disabled" although '
                        'the unit passes no %s' % OFF_FLAG))
    return reasons


def judge(log_lines, exec_args, server_info, architecture=None, fused_architectures=None, api_calls=None,
          require_fusion_log=True, architecture_problem=None, release=""):
    """The verdict on one start. Pure.

    log_lines: this start's log (API key already taken out); exec_args: the unit's ExecStart arguments;
    server_info: /server_info's tp_size, model_path, speculative_algorithm, flashinfer_allreduce_fusion_backend;
    architecture: the served model's (config.json ``architectures[0]``, as SGLang picks it), or None with
    ``architecture_problem`` saying why it is unknown; fused_architectures: the architectures whose layers call the
    kernel in the release the unit runs (None: unknown, with ``architecture_problem``); api_calls: None when no
    FlashInfer API log was named, else {"files": n, "calls": {API name: count}, "where": the files looked for};
    require_fusion_log: a start whose log shows neither the fused path set up nor a reason for skipping it fails;
    release: what to call the release in messages ("sglang 0.5.21").

    Returns {"passed", "msg", "reasons": [{"code", "message"}], "fusion_expected", "unit", "evidence"}.
    """
    unit = unit_settings(list(exec_args))
    served = dict(server_info or {})
    reasons = _served_reasons(unit, served)
    expected, not_expected = fusion_expected(unit)
    seen = read_log(log_lines)
    evidence = {"enabled_ranks": sorted({entry[0] for entry in seen["enabled"] if entry[0]}),
                "enabled_backends": _first_distinct([entry[1] for entry in seen["enabled"] if entry[1]], 4),
                "architecture": architecture, "architecture_fused": None, "api_calls": None}
    if expected:
        if unit["fusion_backend"] and unit["fusion_backend"] != "auto" \
                and served.get("flashinfer_allreduce_fusion_backend") != unit["fusion_backend"]:
            reasons.append(("served_fusion_backend", "it serves flashinfer_allreduce_fusion_backend=%s, its unit "
                            "asks for %s" % (served.get("flashinfer_allreduce_fusion_backend"),
                                             unit["fusion_backend"])))
        off = _off_reasons(seen)
        reasons += off
        if unit["dp_attention"]:
            reasons.append(("dp_attention", "the unit enables data-parallel attention (--enable-dp-attention), and "
                            "SGLang calls the fused kernel only without it"))
        if fused_architectures is None or architecture is None:
            reasons.append(("architecture_unknown", "whether the model's layers can call the fused kernel is not "
                            "known: %s" % (architecture_problem or "no architecture or list of fused architectures")))
        else:
            evidence["architecture_fused"] = architecture in fused_architectures
            if not evidence["architecture_fused"]:
                reasons.append(("architecture_unfused", "the model's architecture %s never calls the fused kernel in "
                                "%s: its decoder layers do not hand their all-reduce to forward_with_allreduce_fusion "
                                "(%d of the release's architectures do). SGLang sets the workspace up, and logs fusion "
                                "enabled, for every model; this one never uses it"
                                % (architecture, release or "this SGLang", len(fused_architectures))))
        if not seen["enabled"] and not off and require_fusion_log:
            reasons.append(("not_set_up", 'the release never set the fused path up: this start\'s log has no '
                            '"FlashInfer AllReduce Fusion enabled and workspace initialized" line and no line saying '
                            'why fusion was skipped, which is how a release whose own architecture gate refuses this '
                            'GPU (G1 on SM120) keeps fusion off; the fusion patch is probably not applied to the venv '
                            'the server runs (fusion_patch)'))
        wrong = [b for b in evidence["enabled_backends"] if unit["fusion_backend"] not in ("", "auto")
                 and b != unit["fusion_backend"]]
        if wrong:
            reasons.append(("enabled_backend", "the fused path came up with backend=%s, the unit asks for %s"
                            % (", ".join(wrong), unit["fusion_backend"])))
        if api_calls is not None:
            calls = dict(api_calls.get("calls") or {})
            evidence["api_calls"] = {"files": api_calls.get("files", 0), KERNEL_API: calls.get(KERNEL_API, 0),
                                     WORKSPACE_API: calls.get(WORKSPACE_API, 0)}
            where = api_calls.get("where") or "the FlashInfer API log"
            if not api_calls.get("files"):
                reasons.append(("api_log_missing", "no FlashInfer API log of this start at %s: the server needs "
                                "FLASHINFER_LOGLEVEL=1 and FLASHINFER_LOGDEST=<a file the service user may write; %%i "
                                "for one per process> in its environment" % where))
            elif not calls.get(KERNEL_API):
                reasons.append(("api_log_no_calls", "FlashInfer's API log (%d file(s) at %s) records no %s call "
                                "(%s: %d): the kernel never ran" % (api_calls["files"], where, KERNEL_API,
                                                                    WORKSPACE_API, calls.get(WORKSPACE_API, 0))))
    passed = not reasons
    return {"passed": passed, "msg": _message(passed, reasons, unit, served, expected, not_expected, seen, evidence),
            "reasons": [{"code": code, "message": text} for code, text in reasons], "fusion_expected": expected,
            "unit": unit, "evidence": evidence}


def _message(passed, reasons, unit, served, expected, not_expected, seen, evidence):
    asked = "tp_size=%d, model_path=%s%s%s" % (
        unit["tp_size"], unit["model_path"],
        ", speculative_algorithm=" + unit["speculative_algorithm"] if unit["speculative_algorithm"] else "",
        ", fusion %s" % (unit["fusion_flag"] + ("=" + unit["fusion_backend"] if unit["fusion_backend"] else ""))
        if unit["fusion_flag"] else "")
    if not passed:
        return "serves, but not what its unit starts (%s): %s. Served: tp_size=%s, model_path=%s, " \
               "speculative_algorithm=%s, flashinfer_allreduce_fusion_backend=%s." % (
                   asked, "; ".join(reason[1] for reason in reasons), served.get("tp_size", "?"),
                   served.get("model_path", "?"), served.get("speculative_algorithm", "?"),
                   served.get("flashinfer_allreduce_fusion_backend", "?"))
    if not expected:
        return "serves what its unit starts (%s); fusion not judged: %s." % (asked, not_expected)
    parts = []
    if seen["enabled"]:
        backends = ", ".join(evidence["enabled_backends"]) or "?"
        parts.append("fused path set up (backend=%s%s)" % (backends, _ranks(seen["enabled"])))
    else:
        parts.append("no line on the fused path in this start's log (not required here)")
    parts.append("%s calls the kernel in this release" % evidence["architecture"])
    calls = evidence["api_calls"]
    parts.append("FlashInfer API log: %d %s calls in %d file(s)" % (calls[KERNEL_API], KERNEL_API, calls["files"])
                 if calls else "kernel calls not counted (no FlashInfer API log named)")
    return "serves what its unit starts (%s), fused: %s." % (asked, "; ".join(parts))
