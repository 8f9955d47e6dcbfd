#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/bench_gate.py and module_utils/bench_report.py (runs on the controller)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_benchmark_gate
short_description: Judge one SGLang benchmark measurement against a baseline and write the artifacts
version_added: "0.1.0"
description:
  - Reads what C(roles/sglang_benchmark/files/bench_runner.py) measured on one host (SGLang's own benchmark client
    result lines and greedy completions of a fixed prompt set) and decides whether the deployment may stay.
  - A run counts only when every request completed (C(completed == num_prompts)); the gate uses the median output
    tok/s of the counted runs at O(gate_concurrency) and passes when it is at least baseline x (1 + O(margin_pct)/100),
    every run counted, and the completions match the recorded baseline's (token match rate >= O(min_match_rate)).
  - Writes, on the controller, one JSON per run, a history line, a Markdown summary and a PNG chart of the history
    under O(results_dir)/<host>/ (artifacts only, so reported as not changed). With O(record_baseline) it writes the
    baseline file (throughput and completions) from this measurement instead of judging.
  - Never fails on a failed gate (the playbook decides, after rollback); fails on unusable inputs.
  - Trusts no number unchecked. A run's C(output_throughput) counts only as a finite number above 0 and its
    C(completed) only as a whole number (JSON C(true) is neither); a run that fails either does not count. A recorded
    baseline whose C(median_output_tok_s) is not a finite number above 0 (NaN, infinite, 0, negative, a boolean, a
    string) judges nothing. The module then fails naming the file and the field (delete it or record a new one; the
    role's decide step measures a new one itself). Nothing it writes holds a NaN or infinite number (written as
    null).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  host:
    description: The host measured (names its artifact folder, so letters, digits, ".", "_", "-" only).
    type: str
    required: true
  measurement:
    description: The JSON object bench_runner.py printed.
    type: dict
    required: true
  baseline_mode:
    description:
      - C(static) compares with O(baseline_tok_s); C(file) and C(ab) with the median recorded in O(baseline_file).
      - Correctness always compares with the completions in O(baseline_file).
    type: str
    choices: [static, file, ab]
    default: file
  baseline_tok_s:
    description: The static baseline (the seeds measured 82-90 tok/s without speculation); a finite number above 0.
    type: float
  baseline_file:
    description: Path on the controller of this host's recorded baseline (JSON).
    type: path
    required: true
  record_baseline:
    description:
      - Write O(baseline_file) from this measurement (all runs must count) and do not judge.
      - A baseline already there that is unreadable, holds no usable throughput or was measured with other settings
        is kept beside it, renamed C(<name>.replaced-<UTC time>.json), instead of overwritten.
    type: bool
    default: false
  margin_pct:
    description: Required gain over the baseline, in percent (a finite number, 0 or more; 0 passes a server as fast
      as the baseline).
    type: float
    default: 5.0
  gate_concurrency:
    description: The concurrency whose median is gated.
    type: int
    default: 1
  correctness:
    description: Compare greedy completions with the baseline's.
    type: bool
    default: true
  min_match_rate:
    description: Lowest token match rate (0..1) of the greedy completions that passes.
    type: float
    default: 0.75
  tie_max_gap:
    description:
      - A prompt whose completion parts from the baseline's where, in both servers' top-2 logprobs, the two tokens
        are the two best and at most this far apart (nats) parted at a tie and counts as matching.
      - The default is one bfloat16 step of logits from 16 to 32; 0 takes exact ties only. From 0 to 0.5.
      - Completions without logprobs (a server that refuses them, a baseline recorded before they were asked for)
        are compared token by token.
    type: float
    default: 0.125
  results_dir:
    description: Controller folder for the artifacts (relative paths resolve from the working directory).
    type: path
    required: true
  context:
    description: Facts recorded with the run (venv, lock, patch state, rollback outcome...).
    type: dict
    default: {}
  write_artifacts:
    description:
      - Write the run JSON, history, summary and chart. Off for the judgement of one all-reduce path trial (the
        gate's run that follows records every path side by side through O(allreduce)).
    type: bool
    default: true
  allreduce:
    description:
      - "For C(sglang_allreduce_path=auto) with several candidates: the trials' outcome, C(winner), C(why) and
        C(paths) (one judgement per path: C(path), C(passed), C(median_tok_s), C(bar_tok_s), C(baseline_tok_s),
        C(match_rate), C(failures)). Recorded in the run JSON, tabled in the summary, charted in
        C(allreduce-paths.png), and its C(why) closes the message."
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Judge the measurement
  sglang_benchmark_gate:
    host: "{{ inventory_hostname }}"
    measurement: "{{ __sglang_benchmark_measured.stdout | from_json }}"
    baseline_mode: static
    baseline_tok_s: 82
    baseline_file: reports/benchmark/baselines/{{ inventory_hostname }}.json
    results_dir: reports/benchmark
  delegate_to: localhost
  register: gate
"""

RETURN = r"""
passed:
  description: The verdict (also true after O(record_baseline)).
  returned: always
  type: bool
message:
  description: The verdict with every number it used.
  returned: always
  type: str
failures:
  description: One line per failed check (incomplete, throughput, correctness).
  returned: always
  type: list
  elements: str
verdict:
  description: median_tok_s, bar_tok_s, baseline_tok_s, margin_pct, gate_concurrency.
  returned: unless record_baseline
  type: dict
summary:
  description: Per concurrency, counted runs, median/min/max/spread of output tok/s, TTFT, TPOT, accept length.
  returned: always
  type: dict
correctness:
  description: match_rate, ties (prompts that parted at a tie) and per-prompt rows (match, tie_at), when checked.
  returned: when correctness is on and not record_baseline
  type: dict
artifacts:
  description:
    - Paths of the run JSON, history, summary and chart.
    - When recording, the baseline file, and C(replaced_baseline) where an earlier one was kept aside.
  returned: always
  type: dict
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import atomic_files
from ansible.module_utils import bench_gate
from ansible.module_utils import bench_report
from ansible.module_utils.finite_numbers import finite, json_safe, rate_problem
from ansible.module_utils import param_checks


def _load_baseline(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise bench_gate.GateInputError("cannot read the baseline file %s: %s" % (path, exc))


def _record(module, p, measurement, summary, num_prompts):
    stats = summary.get(p["gate_concurrency"])
    if stats is None or stats["counted"] != stats["runs"] or stats["median_output_tok_s"] is None:
        problems = stats["problems"] if stats else ["no runs at concurrency %d" % p["gate_concurrency"]]
        module.fail_json(msg="%s: cannot record a baseline from an incomplete measurement: %s"
                         % (p["host"], "; ".join(problems) or "no counted run"), summary=summary)
    problem = rate_problem(stats["median_output_tok_s"], "the median output throughput")
    if problem:  # every counted run is a finite rate above 0, so is their median; a check where it is written
        module.fail_json(msg="%s: cannot record a baseline: %s" % (p["host"], problem), summary=summary)
    broken = [c for c in measurement.get("completions", []) if c.get("error")]
    if p["correctness"] and (broken or not measurement.get("completions")):
        module.fail_json(msg="%s: cannot record baseline completions: %s"
                         % (p["host"], "; ".join(c["error"] for c in broken) or "none were measured"))
    now = datetime.datetime.now(datetime.timezone.utc)
    baseline = {"host": p["host"], "recorded_at": now.isoformat(),
                "median_output_tok_s": stats["median_output_tok_s"], "summary": summary,
                "settings": bench_gate.comparable_settings(measurement["settings"]),
                "server": measurement.get("server", {}), "client": measurement.get("client", {}),
                "completions": measurement.get("completions", []), "context": p["context"]}
    os.makedirs(os.path.dirname(os.path.abspath(p["baseline_file"])), exist_ok=True)
    baseline = json_safe(baseline)  # a NaN or infinite number anywhere (a logprob, a setting) is recorded as null
    kept = _keep_other_baseline(p["baseline_file"], baseline["settings"], now)
    atomic_files.write_atomic(p["baseline_file"], (json.dumps(baseline, indent=1, sort_keys=True, allow_nan=False)
                                                   + "\n").encode())
    artifacts = dict({"baseline": p["baseline_file"]}, **({"replaced_baseline": kept} if kept else {}))
    module.exit_json(changed=True, passed=True, failures=[], summary=summary, artifacts=artifacts,
                     message="%s: baseline recorded: median %.1f tok/s at concurrency %d, %d completions, in %s%s"
                     % (p["host"], stats["median_output_tok_s"], p["gate_concurrency"],
                        len(baseline["completions"]), p["baseline_file"],
                        " (the one it replaces, not comparable with it, is kept as %s)" % kept if kept else ""))


def _keep_other_baseline(path, settings, now):
    """Moves aside a recorded baseline that is unreadable, holds no usable throughput or was measured with settings
    other than SETTINGS (the one a new recording would otherwise overwrite is then not lost); its new path, or
    None."""
    try:
        old = _load_baseline(path)
        if old is not None:
            bench_gate.recorded_tok_s(old, path)
    except bench_gate.GateInputError:
        old = {}
    if old is None or old.get("settings") == settings:
        return None
    root, ext = os.path.splitext(path)
    kept = "%s.replaced-%s%s" % (root, now.strftime("%Y%m%dT%H%M%S.%fZ"), ext or ".json")
    os.replace(path, kept)
    return kept


def _baseline_number(p, baseline):
    if p["baseline_mode"] == "static":
        if p["baseline_tok_s"] is None or rate_problem(p["baseline_tok_s"], "baseline_tok_s"):
            raise bench_gate.GateInputError("baseline_mode static needs baseline_tok_s, a finite number above 0")
        return p["baseline_tok_s"], "static"
    if baseline is None:
        raise bench_gate.GateInputError("no recorded baseline at %s (baseline_mode %s)"
                                        % (p["baseline_file"], p["baseline_mode"]))
    tok_s = bench_gate.recorded_tok_s(baseline, p["baseline_file"])
    return tok_s, "%s, recorded %s" % (p["baseline_mode"], baseline.get("recorded_at", "at an unrecorded time"))


ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    measurement=dict(type="dict", required=True),
    baseline_mode=dict(type="str", default="file", choices=["static", "file", "ab"]),
    baseline_tok_s=dict(type="float"),
    baseline_file=dict(type="path", required=True),
    record_baseline=dict(type="bool", default=False),
    margin_pct=dict(type="float", default=5.0),
    gate_concurrency=dict(type="int", default=1),
    correctness=dict(type="bool", default=True),
    min_match_rate=dict(type="float", default=0.75),
    tie_max_gap=dict(type="float", default=0.125),
    results_dir=dict(type="path", required=True),
    context=dict(type="dict", default={}),
    write_artifacts=dict(type="bool", default=True),
    allreduce=dict(type="dict", default={}),
)


def _module():
    """The AnsibleModule, with the module's own message where Ansible's float conversion raises OverflowError (an
    int too large for a float given to a float option, say margin_pct written as 400 digits: a traceback there)."""
    try:
        return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False)
    except OverflowError:
        pass  # reported below, outside the handler (fail_json inside it would attach the exception)
    floats = sorted(name for name, spec in ARGUMENT_SPEC.items() if spec.get("type") == "float")
    raw = {name: dict(spec, type="raw") if name in floats else spec for name, spec in ARGUMENT_SPEC.items()}
    module = AnsibleModule(argument_spec=raw, supports_check_mode=False)
    huge = [name for name in floats if isinstance(module.params.get(name), int)
            and not isinstance(module.params[name], bool) and finite(module.params[name]) is None]
    module.fail_json(msg="benchmark gate refused its inputs, nothing written: too large for a number (an integer "
                     "no float holds): %s" % ", ".join(huge or floats))
    return None  # not reached: fail_json exits


def main():
    module = _module()
    refused = param_checks.refusal("sglang_benchmark_gate", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    measurement = p["measurement"]
    problems = bench_gate.input_problems(p["host"], p["margin_pct"], p["gate_concurrency"], p["min_match_rate"],
                                         p["baseline_tok_s"], p["tie_max_gap"])
    if problems:
        module.fail_json(msg="benchmark gate refused its inputs, nothing written: %s" % "; ".join(problems))
    try:
        num_prompts = bench_gate.count((measurement.get("settings") or {}).get("num_prompts"),
                                       "measurement settings.num_prompts")
        summary = bench_gate.summarize(measurement.get("runs", []), num_prompts)
        if p["record_baseline"]:
            _record(module, p, measurement, summary, num_prompts)
        baseline = _load_baseline(p["baseline_file"])
        baseline_tok_s, source = _baseline_number(p, baseline)
        if baseline is not None and (p["baseline_mode"] != "static" or p["correctness"]):
            want = json_safe(bench_gate.comparable_settings(measurement["settings"]))
            if baseline.get("settings") != want:
                raise bench_gate.GateInputError(
                    "the baseline in %s was measured with other settings (%s), this run with %s: record it again "
                    "(a deploy or playbooks/benchmark.yml measures a new one when the recorded one does not fit "
                    "its settings: two more restarts)"
                    % (p["baseline_file"], baseline.get("settings"), want))
        correctness = None
        if p["correctness"]:
            if baseline is None:
                raise bench_gate.GateInputError(
                    "no recorded completions to check correctness against (%s): record a baseline first "
                    "(sglang_benchmark_record_baseline=true on a known-good server, or baseline_mode ab)"
                    % p["baseline_file"])
            broken = [c for c in measurement.get("completions", []) if c.get("error")]
            if broken:
                correctness = {"prompts": len(measurement["completions"]), "match_rate": 0.0,
                               "rows": [], "errors": [c["error"] for c in broken]}
            else:
                correctness = bench_gate.compare_completions(baseline["completions"], measurement["completions"],
                                                             p["tie_max_gap"])
        verdict = bench_gate.judge(summary, p["gate_concurrency"], baseline_tok_s, p["margin_pct"], correctness,
                                   p["min_match_rate"])
    except (bench_gate.GateInputError, KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        module.fail_json(msg="%s: benchmark gate cannot judge: %s" % (p["host"], exc))
    message = bench_gate.describe(p["host"], verdict, summary, source, correctness, p["min_match_rate"])
    if p["allreduce"]:
        message += " All-reduce path (auto, every candidate measured): %s." % p["allreduce"].get("why", "")
    stats = summary[p["gate_concurrency"]]
    if not p["write_artifacts"]:
        module.exit_json(changed=False, passed=verdict["passed"], message=message, failures=verdict["failures"],
                         verdict={k: verdict[k] for k in ("median_tok_s", "bar_tok_s", "baseline_tok_s",
                                                          "margin_pct", "gate_concurrency")},
                         summary={str(k): v for k, v in summary.items()}, correctness=correctness, artifacts={})
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    record = dict(verdict, stamp=stamp, host=p["host"], message=message, summary=summary,
                  spread_pct=stats["spread_pct"], accept_length=stats["accept_length"],
                  match_rate=correctness["match_rate"] if correctness else None, correctness=correctness,
                  baseline_source=source, measurement=measurement, context=p["context"],
                  venv=p["context"].get("venv"), sglang=(measurement.get("client") or {}).get("sglang"),
                  rolled_back=p["context"].get("rolled_back"), allreduce=p["allreduce"] or None)
    record = json_safe(record)  # a NaN the client wrote into a run that did not count is recorded as null
    try:
        artifacts = bench_report.write_artifacts(p["results_dir"], p["host"], record)
    except (OSError, ImportError) as exc:
        module.fail_json(msg="%s: could not write the benchmark artifacts under %s: %s"
                         % (p["host"], p["results_dir"], exc), passed=verdict["passed"], message=message)
    # Reports are not managed state: a re-run that writes new ones has changed nothing on any host.
    module.exit_json(changed=False, passed=verdict["passed"], message=message, failures=verdict["failures"],
                     verdict={k: verdict[k] for k in ("median_tok_s", "bar_tok_s", "baseline_tok_s", "margin_pct",
                                                      "gate_concurrency")},
                     summary={str(k): v for k, v in summary.items()}, correctness=correctness, artifacts=artifacts)


if __name__ == "__main__":
    main()
