# -*- coding: utf-8 -*-
"""One run of the benchmark gate, from the sglang_benchmark_gate module's parameters to its result.

Either records this host's baseline file from the measurement (an earlier baseline it cannot be compared with is
kept aside, never overwritten), or judges the measurement against the baseline (module_utils/bench_gate.py) and
writes the run's artifacts (module_utils/bench_report.py). ``run`` returns the module's result; ``GateFailure`` is
every way it fails, with its message and the result fields that go with it. library/sglang_benchmark_gate.py is the
Ansible shell around it.
"""
from __future__ import annotations

import datetime
import json
import os

from ansible.module_utils import atomic_files
from ansible.module_utils import bench_gate
from ansible.module_utils import bench_report
from ansible.module_utils.finite_numbers import finite, json_safe, rate_problem

# What a measurement or baseline of the wrong shape raises while it is judged: reported as "cannot judge".
JUDGE_ERRORS = (bench_gate.GateInputError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError)
VERDICT_KEYS = ("median_tok_s", "bar_tok_s", "baseline_tok_s", "margin_pct", "gate_concurrency")
STAMP = "%Y%m%dT%H%M%S.%fZ"


class GateFailure(Exception):
    """The module fails: MSG, with FIELDS added to its result. Not a failed gate (that is a result, passed false)."""

    def __init__(self, msg, **fields):
        Exception.__init__(self, msg)
        self.msg = msg
        self.fields = fields


def _utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def load_baseline(path):
    """The parsed baseline file at PATH, None when there is none; GateInputError when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise bench_gate.GateInputError("cannot read the baseline file %s: %s" % (path, exc))


def keep_other_baseline(path, settings, now):
    """Moves aside a recorded baseline that is unreadable, holds no usable throughput or was measured with settings
    other than SETTINGS (the one a new recording would otherwise overwrite is then not lost); its new path, or
    None."""
    try:
        old = load_baseline(path)
        if old is not None:
            bench_gate.recorded_tok_s(old, path)
    except bench_gate.GateInputError:
        old = {}
    if old is None or old.get("settings") == settings:
        return None
    root, ext = os.path.splitext(path)
    kept = "%s.replaced-%s%s" % (root, now.strftime(STAMP), ext or ".json")
    os.replace(path, kept)
    return kept


def record_baseline(p, measurement, summary, now=None):
    """Writes P's baseline file from MEASUREMENT (every run at the gated concurrency must count, and with
    correctness on, every completion must be there); the module's result."""
    stats = summary.get(p["gate_concurrency"])
    if stats is None or stats["counted"] != stats["runs"] or stats["median_output_tok_s"] is None:
        problems = stats["problems"] if stats else ["no runs at concurrency %d" % p["gate_concurrency"]]
        raise GateFailure("%s: cannot record a baseline from an incomplete measurement: %s"
                          % (p["host"], "; ".join(problems) or "no counted run"), summary=summary)
    problem = rate_problem(stats["median_output_tok_s"], "the median output throughput")
    if problem:  # every counted run is a finite rate above 0, so is their median; a check where it is written
        raise GateFailure("%s: cannot record a baseline: %s" % (p["host"], problem), summary=summary)
    broken = [c for c in measurement.get("completions", []) if c.get("error")]
    if p["correctness"] and (broken or not measurement.get("completions")):
        raise GateFailure("%s: cannot record baseline completions: %s"
                          % (p["host"], "; ".join(c["error"] for c in broken) or "none were measured"))
    now = now or _utc_now()
    baseline = {"host": p["host"], "recorded_at": now.isoformat(),
                "median_output_tok_s": stats["median_output_tok_s"], "summary": summary,
                "settings": bench_gate.comparable_settings(measurement["settings"]),
                "server": measurement.get("server", {}), "client": measurement.get("client", {}),
                "completions": measurement.get("completions", []), "context": p["context"]}
    baseline = json_safe(baseline)  # a NaN or infinite number anywhere (a logprob, a setting) is recorded as null
    try:
        os.makedirs(os.path.dirname(os.path.abspath(p["baseline_file"])), exist_ok=True)
        kept = keep_other_baseline(p["baseline_file"], baseline["settings"], now)
        try:
            atomic_files.write_atomic(p["baseline_file"], (json.dumps(baseline, indent=1, sort_keys=True,
                                                                      allow_nan=False) + "\n").encode())
        except OSError:
            if kept:  # no half-done record: the baseline it was to replace goes back where it was
                os.replace(kept, p["baseline_file"])
            raise
    except OSError as exc:
        raise GateFailure("%s: could not record the baseline in %s: %s" % (p["host"], p["baseline_file"], exc),
                          summary=summary)
    artifacts = dict({"baseline": p["baseline_file"]}, **({"replaced_baseline": kept} if kept else {}))
    return dict(changed=True, passed=True, failures=[], summary=summary, artifacts=artifacts,
                message="%s: baseline recorded: median %.1f tok/s at concurrency %d, %d completions, in %s%s"
                % (p["host"], stats["median_output_tok_s"], p["gate_concurrency"],
                   len(baseline["completions"]), p["baseline_file"],
                   " (the one it replaces, not comparable with it, is kept as %s)" % kept if kept else ""))


def baseline_number(p, baseline):
    """(tok/s, where it came from): the throughput P's baseline_mode compares with."""
    if p["baseline_mode"] == "static":
        if p["baseline_tok_s"] is None or rate_problem(p["baseline_tok_s"], "baseline_tok_s"):
            raise bench_gate.GateInputError("baseline_mode static needs baseline_tok_s, a finite number above 0")
        return p["baseline_tok_s"], "static"
    if baseline is None:
        raise bench_gate.GateInputError("no recorded baseline at %s (baseline_mode %s)"
                                        % (p["baseline_file"], p["baseline_mode"]))
    tok_s = bench_gate.recorded_tok_s(baseline, p["baseline_file"])
    return tok_s, "%s, recorded %s" % (p["baseline_mode"], baseline.get("recorded_at", "at an unrecorded time"))


def check_settings(p, measurement, baseline):
    """GateInputError when BASELINE, used for throughput or completions, was measured with other settings."""
    if baseline is None or (p["baseline_mode"] == "static" and not p["correctness"]):
        return
    want = json_safe(bench_gate.comparable_settings(measurement["settings"]))
    if baseline.get("settings") != want:
        raise bench_gate.GateInputError(
            "the baseline in %s was measured with other settings (%s), this run with %s: record it again "
            "(a deploy or playbooks/benchmark.yml measures a new one when the recorded one does not fit "
            "its settings: two more restarts)"
            % (p["baseline_file"], baseline.get("settings"), want))


def correctness_of(p, measurement, baseline):
    """The completions compared with the baseline's (None with correctness off). Completions the runner could not
    get match nothing: match rate 0, with their errors."""
    if not p["correctness"]:
        return None
    if baseline is None:
        raise bench_gate.GateInputError(
            "no recorded completions to check correctness against (%s): record a baseline first "
            "(sglang_benchmark_record_baseline=true on a known-good server, or baseline_mode ab)"
            % p["baseline_file"])
    broken = [c for c in measurement.get("completions", []) if c.get("error")]
    if broken:
        return {"prompts": len(measurement["completions"]), "match_rate": 0.0,
                "rows": [], "errors": [c["error"] for c in broken]}
    return bench_gate.compare_completions(baseline["completions"], measurement["completions"], p["tie_max_gap"])


def _judged(verdict, summary, correctness, artifacts):
    # Reports are not managed state: a re-run that writes new ones has changed nothing on any host.
    return dict(changed=False, passed=verdict["passed"], failures=verdict["failures"],
                verdict={k: verdict[k] for k in VERDICT_KEYS}, summary={str(k): v for k, v in summary.items()},
                correctness=correctness, artifacts=artifacts)


def run(p, now=None):
    """The module's result for parameters P (already past param_checks); GateFailure when it cannot give one."""
    measurement = p["measurement"]
    problems = bench_gate.input_problems(p["host"], p["margin_pct"], p["gate_concurrency"], p["min_match_rate"],
                                         p["baseline_tok_s"], p["tie_max_gap"])
    if problems:
        raise GateFailure("benchmark gate refused its inputs, nothing written: %s" % "; ".join(problems))
    try:
        num_prompts = bench_gate.count((measurement.get("settings") or {}).get("num_prompts"),
                                       "measurement settings.num_prompts")
        summary = bench_gate.summarize(measurement.get("runs", []), num_prompts)
        if p["record_baseline"]:
            return record_baseline(p, measurement, summary, now)
        baseline = load_baseline(p["baseline_file"])
        baseline_tok_s, source = baseline_number(p, baseline)
        check_settings(p, measurement, baseline)
        correctness = correctness_of(p, measurement, baseline)
        verdict = bench_gate.judge(summary, p["gate_concurrency"], baseline_tok_s, p["margin_pct"], correctness,
                                   p["min_match_rate"])
    except JUDGE_ERRORS as exc:
        raise GateFailure("%s: benchmark gate cannot judge: %s" % (p["host"], exc))
    message = bench_gate.describe(p["host"], verdict, summary, source, correctness, p["min_match_rate"])
    if p["allreduce"]:
        message += " All-reduce path (auto, every candidate measured): %s." % p["allreduce"].get("why", "")
    if not p["write_artifacts"]:
        return dict(_judged(verdict, summary, correctness, {}), message=message)
    stats = summary[p["gate_concurrency"]]
    record = dict(verdict, stamp=(now or _utc_now()).strftime(STAMP), host=p["host"], message=message,
                  summary=summary, spread_pct=stats["spread_pct"], accept_length=stats["accept_length"],
                  match_rate=correctness["match_rate"] if correctness else None, correctness=correctness,
                  baseline_source=source, measurement=measurement, context=p["context"],
                  venv=p["context"].get("venv"), sglang=(measurement.get("client") or {}).get("sglang"),
                  rolled_back=p["context"].get("rolled_back"), allreduce=p["allreduce"] or None)
    record = json_safe(record)  # a NaN the client wrote into a run that did not count is recorded as null
    try:
        artifacts = bench_report.write_artifacts(p["results_dir"], p["host"], record)
    except (OSError, ImportError) as exc:
        raise GateFailure("%s: could not write the benchmark artifacts under %s: %s"
                          % (p["host"], p["results_dir"], exc), passed=verdict["passed"], message=message)
    return dict(_judged(verdict, summary, correctness, artifacts), message=message)


def raw_floats(argument_spec):
    """ARGUMENT_SPEC with its float options taken as they come (type raw): Ansible's float conversion raises
    OverflowError on an int too large for a float, and the module then parses again this way to name the option."""
    return {name: dict(spec, type="raw") if spec.get("type") == "float" else spec
            for name, spec in argument_spec.items()}


def too_large(argument_spec, params):
    """The refusal for float options given an int no float holds (PARAMS parsed with raw_floats); every float
    option is named when none of PARAMS is such an int."""
    floats = sorted(name for name, spec in argument_spec.items() if spec.get("type") == "float")
    huge = [name for name in floats if isinstance(params.get(name), int)
            and not isinstance(params[name], bool) and finite(params[name]) is None]
    return ("benchmark gate refused its inputs, nothing written: too large for a number (an integer no float "
            "holds): %s" % ", ".join(huge or floats))
