# -*- coding: utf-8 -*-
"""The benchmark gate's arithmetic: which runs count, what they measured, and the verdict.

Input is what roles/sglang_benchmark/files/bench_runner.py prints: SGLang's own benchmark client's JSON result
line per run (``sglang.benchmark.serving`` / ``sglang.bench_serving`` ``--output-file``), plus greedy completions
of a fixed prompt set. Pure functions; module_utils/bench_gate_run.py runs them for the module
library/sglang_benchmark_gate.py (its shell).

Rules (the reasons are in docs/benchmark-gate.md):
  * a run counts only when ``completed == num_prompts``: a run whose requests failed still writes a line;
  * throughput is the median of the counted runs' ``output_throughput`` at each concurrency; the gate reads the
    single-stream one (concurrency 1, the number the seeds report) unless told another;
  * pass when median >= baseline * (1 + margin/100), and every run counted, and the completions match;
  * no number is trusted unchecked (module_utils/finite_numbers.py): a throughput that is NaN, infinite, not above 0
    or a boolean does not count, a recorded baseline that is not a finite rate above 0 judges nothing, and what is
    recorded holds no non-finite number.
"""
from __future__ import annotations

import json
import re

from ansible.module_utils.finite_numbers import finite, rate_problem, shown, whole

RESULT_KEYS = ("output_throughput", "completed", "mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms",
               "median_tpot_ms", "mean_itl_ms", "accept_length", "duration", "total_output_tokens")


# How far apart two tokens' logprobs may be, in each server, for a parting there to count as a tie: one bfloat16
# step of logits in [16, 32), where the top logits of real models lie (the logprob gap is the logit gap). The real
# server's ties were within 2^-6 (logits below 4): docs/benchmark-gate.md.
TIE_MAX_GAP = 0.125
TIE_MAX_GAP_LIMIT = 0.5


class GateInputError(ValueError):
    """The inputs cannot be judged at all (not a failed gate: a broken benchmark or baseline)."""


def parse_result_lines(text):
    """The JSON objects of a --output-file (one per line; the client appends)."""
    results = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise GateInputError("result line %d is not JSON: %s" % (number, exc))
        if not isinstance(value, dict):
            raise GateInputError("result line %d is not a JSON object" % number)
        results.append(value)
    return results


_SAFE_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")


def input_problems(host, margin_pct, gate_concurrency, min_match_rate, baseline_tok_s=None, tie_max_gap=TIE_MAX_GAP):
    """Bounds of the gate's own parameters; the host names a folder under the results directory."""
    problems = []
    if not isinstance(host, str) or not _SAFE_HOST.match(host) or host in (".", ".."):
        problems.append("host %r cannot name a results folder: letters, digits, '.', '_', '-' only, starting with "
                        "a letter or digit (no '/', '..', spaces or newlines)" % (host,))
    margin = finite(margin_pct)
    if margin is None or margin < 0:
        problems.append("margin_pct must be a finite number, 0 or more (got %s): a negative margin would pass a "
                        "slower server, an infinite or NaN one judges nothing" % shown(margin_pct))
    concurrency = whole(gate_concurrency)
    if concurrency is None or concurrency < 1:
        problems.append("gate_concurrency must be a whole number, 1 or more (got %s)" % shown(gate_concurrency))
    match = finite(min_match_rate)
    if match is None or not 0 <= match <= 1:
        problems.append("min_match_rate must be from 0 to 1 (got %s)" % shown(min_match_rate))
    gap = finite(tie_max_gap)
    if gap is None or not 0 <= gap <= TIE_MAX_GAP_LIMIT:
        problems.append("tie_max_gap must be from 0 to %s (got %s)" % (TIE_MAX_GAP_LIMIT, shown(tie_max_gap)))
    if baseline_tok_s is not None:
        problem = rate_problem(baseline_tok_s, "baseline_tok_s")
        if problem:
            problems.append(problem)
    return problems


def count(value, what):
    """A whole, non-negative count from the measurement (JSON may hold it as 8, 8.0 or "8"; never true)."""
    number = None
    if not isinstance(value, bool):
        try:
            number = whole(float(value))
        except (TypeError, ValueError, OverflowError):
            number = None
    if number is None:
        raise GateInputError("%s must be a whole number, got %s" % (what, shown(value)))
    return number


def run_problem(run, num_prompts):
    """Why a run does not count, or None."""
    if run.get("error"):
        return run["error"]
    result = run.get("result")
    if not isinstance(result, dict):
        return "the client wrote no result (exit code %s)" % run.get("rc")
    completed = whole(result.get("completed"))
    if completed is None:
        return "completed %s is not a count of requests" % shown(result.get("completed"))
    if completed != num_prompts:
        return "completed %s of %d requests" % (completed, num_prompts)
    if "output_throughput" not in result or result["output_throughput"] is None:
        return "no output throughput"
    return rate_problem(result["output_throughput"], "output_throughput")


def _median(values):
    """The median of the finite numbers among VALUES (None without any); halves added, so two huge ones do not
    make an infinite median."""
    values = sorted(v for v in (finite(value) for value in values) if v is not None)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else values[middle - 1] / 2.0 + values[middle] / 2.0


def _spread_pct(rates, median):
    if not rates or not median:
        return None
    return finite(100.0 * ((max(rates) - min(rates)) / median))


def summarize(runs, num_prompts):
    """Per concurrency: counted runs, median and spread of output tok/s, latencies, accept length."""
    by_concurrency = {}
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        raise GateInputError("the measurement's runs must be a list of run records")
    for run in runs:
        by_concurrency.setdefault(count(run.get("concurrency"), "a run's concurrency"), []).append(run)
    summary = {}
    for concurrency, group in sorted(by_concurrency.items()):
        problems = []
        counted = []
        for run in group:
            problem = run_problem(run, num_prompts)
            if problem:
                problems.append("run %s: %s" % (run.get("repeat", "?"), problem))
            else:
                counted.append(run["result"])
        rates = [finite(r["output_throughput"]) for r in counted]  # counted: each one a finite rate above 0
        median = _median(rates)
        summary[concurrency] = {
            "runs": len(group),
            "counted": len(counted),
            "problems": problems,
            "output_tok_s": rates,
            "median_output_tok_s": median,
            "min_output_tok_s": min(rates) if rates else None,
            "max_output_tok_s": max(rates) if rates else None,
            "spread_pct": _spread_pct(rates, median),
            "median_ttft_ms": _median([r.get("median_ttft_ms") for r in counted]),
            "median_tpot_ms": _median([r.get("median_tpot_ms") for r in counted]),
            "median_itl_ms": _median([r.get("median_itl_ms", r.get("mean_itl_ms")) for r in counted]),
            "accept_length": _median([r.get("accept_length") for r in counted]),
        }
    return summary


def token_match(reference, observed):
    """Share of positions where two greedy completions agree (0..1), over the longer of the two."""
    length = max(len(reference), len(observed))
    if length == 0:
        return 1.0
    same = sum(1 for a, b in zip(reference, observed) if a == b)
    return same / float(length)


def _tokens(completion):
    ids = completion.get("output_ids")
    if isinstance(ids, list) and ids:
        return ids
    return (completion.get("text") or "").split()


def first_difference(ours, theirs):
    """The first position where two token lists differ (a shorter list differs where it ends); None if equal."""
    for position, (mine, other) in enumerate(zip(ours, theirs)):
        if mine != other:
            return position
    if len(ours) != len(theirs):
        return min(len(ours), len(theirs))
    return None


def top_at(top_logprobs, position):
    """{token id: logprob} at one output position of top logprobs as the benchmark runner records them
    ([[token id, logprob], ...] per position, made from SGLang's output_top_logprobs by bench_runner.top_logprobs);
    {} where the server sent none. A logprob that is not a finite number is left out: it can never make a tie."""
    row = top_logprobs[position] if isinstance(top_logprobs, list) and position < len(top_logprobs) else None
    out = {}
    for entry in row if isinstance(row, list) else []:
        if isinstance(entry, list) and len(entry) == 2 and finite(entry[1]) is not None:
            out[entry[0]] = finite(entry[1])
    return out


def logprob_gap(top, chosen, other):
    """How much more likely one server held its chosen token than the other one (top: top_at of a position);
    None where either token is not among its top tokens."""
    if chosen not in top or other not in top:
        return None
    return top[chosen] - top[other]


def within_gap(gap, max_gap):
    """Whether a logprob_gap is a tie: at most max_gap either way (a rounding's worth of slack)."""
    return gap is not None and abs(gap) <= max_gap + 1e-9


def tie_at(reference, observed, max_gap=TIE_MAX_GAP):
    """The output position where two greedy completions part at a tie, else None.

    Where two tokens' logits are equal, or one bfloat16 rounding apart, which one a greedy server takes depends on
    the kernels and the batch (the real server broke such ties both ways, even against itself:
    docs/benchmark-gate.md). So where the completions first differ, and in both servers' own top-2 logprobs there
    the reference's token and the observed one are the two best, at most max_gap apart, the parting is a tie, not
    an error; what follows comes from other prefixes and cannot be compared."""
    ref_ids, obs_ids = reference.get("output_ids"), observed.get("output_ids")
    if not (isinstance(ref_ids, list) and isinstance(obs_ids, list)):
        return None
    position = first_difference(ref_ids, obs_ids)
    if position is None or position >= min(len(ref_ids), len(obs_ids)):
        return None  # equal, or one stopped where the other went on: no pair of tokens to weigh
    pair = (ref_ids[position], obs_ids[position])
    for completion in (reference, observed):
        if not within_gap(logprob_gap(top_at(completion.get("top_logprobs"), position), *pair), max_gap):
            return None
    return position


def compare_completions(reference, observed, tie_max_gap=TIE_MAX_GAP):
    """Match rate of observed greedy completions against recorded ones, prompt by prompt. A prompt whose completions
    part at a tie of both servers (tie_at) matches: its row says where."""
    ref_by_prompt = {c["prompt"]: c for c in reference}
    rows = []
    for completion in observed:
        ref = ref_by_prompt.get(completion["prompt"])
        if ref is None:
            raise GateInputError("no reference completion for prompt %r: record the baseline again"
                                 % completion["prompt"][:60])
        tie = tie_at(ref, completion, tie_max_gap)
        rows.append({"prompt": completion["prompt"],
                     "match": 1.0 if tie is not None else token_match(_tokens(ref), _tokens(completion)),
                     "tie_at": tie,
                     "reference": (ref.get("text") or "")[:120],
                     "observed": (completion.get("text") or "")[:120]})
    if not rows:
        raise GateInputError("no completions to compare")
    return {"prompts": len(rows), "match_rate": sum(r["match"] for r in rows) / len(rows),
            "ties": sum(1 for r in rows if r["tie_at"] is not None), "rows": rows}


def comparable_settings(config):
    """The benchmark settings a recorded baseline must share with a run to be compared with it."""
    return {k: config.get(k) for k in ("input_len", "output_len", "num_prompts", "seed", "gate_concurrency",
                                       "correctness_max_new_tokens")}


def recorded_tok_s(baseline, path):
    """The throughput a recorded baseline (the parsed file at PATH) holds; GateInputError saying what to do when it
    holds none a run could be judged against (NaN, infinite, 0, negative, a boolean, a string: any run would pass,
    or none could)."""
    if not isinstance(baseline, dict):
        raise GateInputError("the baseline file %s holds no JSON object: delete it, or record a new baseline on a "
                             "known-good server (sglang_benchmark_record_baseline=true, or baseline_mode ab)" % path)
    problem = rate_problem(baseline.get("median_output_tok_s"), "its median_output_tok_s")
    if problem:
        raise GateInputError("the baseline file %s cannot judge any run: %s. Delete it, or record a new baseline on "
                             "a known-good server (sglang_benchmark_record_baseline=true, or baseline_mode ab); a "
                             "deploy measures a new one itself when the recorded one is unusable" % (path, problem))
    return finite(baseline["median_output_tok_s"])


def judge(summary, gate_concurrency, baseline_tok_s, margin_pct, correctness=None, min_match_rate=None):
    """The verdict: passed, the checks that failed, and every number used."""
    failures = []
    stats = summary.get(gate_concurrency)
    if stats is None:
        raise GateInputError("no runs at concurrency %d, the gated one" % gate_concurrency)
    problem = rate_problem(baseline_tok_s, "the baseline")
    if problem:
        raise GateInputError(problem)
    margin = finite(margin_pct)
    if margin is None or margin < 0:
        raise GateInputError("the margin is %s: it must be a finite number, 0 or more" % shown(margin_pct))
    threshold = finite(baseline_tok_s * (1.0 + margin / 100.0))
    if threshold is None:
        raise GateInputError("baseline %s tok/s x (1 + %s %% margin) is not a finite number" % (
            shown(baseline_tok_s), shown(margin_pct)))
    if correctness is not None and (finite(min_match_rate) is None or not 0 <= min_match_rate <= 1):
        raise GateInputError("min_match_rate is %s: it must be from 0 to 1" % shown(min_match_rate))
    for concurrency, group in sorted(summary.items()):
        if group["problems"]:
            failures.append("incomplete: %d of %d runs at concurrency %d did not count (%s)"
                            % (group["runs"] - group["counted"], group["runs"], concurrency,
                               "; ".join(group["problems"])))
    median = finite(stats["median_output_tok_s"])
    if median is None:
        failures.append("throughput: no counted run at concurrency %d" % gate_concurrency)
    elif median < threshold:  # both finite here
        failures.append("throughput: median %.1f tok/s < %.1f tok/s required" % (median, threshold))
    match_rate = finite(correctness["match_rate"]) if correctness is not None else None
    if correctness is not None and (match_rate is None or match_rate < min_match_rate):
        failures.append("correctness: greedy completions match the baseline's %.1f %% < %.1f %% required"
                        % (100 * correctness["match_rate"], 100 * min_match_rate))
    return {"passed": not failures, "failures": failures, "bar_tok_s": threshold, "baseline_tok_s": baseline_tok_s,
            "margin_pct": margin_pct, "median_tok_s": median, "gate_concurrency": gate_concurrency}


def _fmt(value, pattern="%.1f"):
    return "n/a" if value is None else pattern % value


def describe(host, verdict, summary, baseline_source, correctness=None, min_match_rate=None):
    """One paragraph with every number the verdict used (the failure message, also shown on a pass)."""
    stats = summary[verdict["gate_concurrency"]]
    rates = ", ".join("%.1f" % r for r in stats["output_tok_s"]) or "none"
    parts = [
        "%s: benchmark gate %s." % (host, "PASSED" if verdict["passed"] else "FAILED"),
        "Median output %s tok/s at concurrency %d (counted runs: %s; spread %s %%; %d of %d runs counted)"
        % (_fmt(stats["median_output_tok_s"]), verdict["gate_concurrency"], rates, _fmt(stats["spread_pct"]),
           stats["counted"], stats["runs"]),
        "vs required %.1f tok/s = baseline %.1f tok/s (%s) x (1 + %.1f %% margin)."
        % (verdict["bar_tok_s"], verdict["baseline_tok_s"], baseline_source, verdict["margin_pct"]),
        "TTFT %s ms, TPOT %s ms, accept length %s."
        % (_fmt(stats["median_ttft_ms"]), _fmt(stats["median_tpot_ms"], "%.2f"),
           _fmt(stats["accept_length"], "%.2f")),
    ]
    if correctness is not None:
        parts.append("Greedy completions match the baseline's at %.1f %% of tokens on %d prompts (required %.1f %%)%s."
                     % (100 * correctness["match_rate"], correctness["prompts"], 100 * min_match_rate,
                        "; %d parted at a tie in both servers' logprobs and count as matching"
                        % correctness["ties"] if correctness.get("ties") else ""))
    else:
        parts.append("Correctness not checked (sglang_benchmark_correctness is off).")
    for concurrency, group in sorted(summary.items()):
        if concurrency != verdict["gate_concurrency"]:
            parts.append("Concurrency %d: median %s tok/s (%d of %d runs counted)."
                         % (concurrency, _fmt(group["median_output_tok_s"]), group["counted"], group["runs"]))
    if verdict["failures"]:
        parts.append("Failed: " + " | ".join(verdict["failures"]) + ".")
    return " ".join(parts)
