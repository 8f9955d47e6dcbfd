# -*- coding: utf-8 -*-
"""`auto` by measurement: which all-reduce path won the benchmark gate's trials, and whether that choice still holds.

The gate measures every candidate path (``allreduce_paths.decide``'s ``candidates``) in the real server and judges
each against the host's baseline exactly as it judges a deployed server (``bench_gate.judge``: median over the bar,
every run complete, greedy completions matching). ``choose`` keeps the fastest path that passed; the choice is
recorded on the host (``record``) with every path's figures, and ``recorded_path`` lets the next deploy render the
same path while the candidates are the same ones (otherwise the gate decides again). Pure logic, no I/O.

No number is trusted unchecked (module_utils/finite_numbers.py): a row's figures are finite numbers or null, never
booleans; a path that passed has a median above 0; a rate is never NaN (which would win or lose every comparison by
accident) and nothing recorded holds a non-finite number.
"""
from __future__ import annotations

import json

from ansible.module_utils.finite_numbers import finite, rate_problem, shown

VERSION = 1
ROW_KEYS = ("path", "passed", "median_tok_s", "bar_tok_s", "baseline_tok_s", "match_rate", "failures")


class ChoiceError(Exception):
    """Bad input: the message says which."""


def _number(value, what):
    if value is None:
        return None
    number = finite(value)
    if number is None:
        raise ChoiceError("%s must be a finite number or null, got %s" % (what, shown(value)))
    return number


def normalize_rows(rows, candidates):
    """The judged paths, checked: one row per candidate, nothing else, in the candidates' order."""
    if not isinstance(candidates, list) or not candidates or not all(isinstance(c, str) and c for c in candidates):
        raise ChoiceError("candidates must be a non-empty list of path names, got %r" % (candidates,))
    if not isinstance(rows, list):
        raise ChoiceError("rows must be a list of judged paths, got %s" % type(rows).__name__)
    by_path = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("path"), str):
            raise ChoiceError("each row needs a path name, got %r" % (row,))
        if row["path"] in by_path:
            raise ChoiceError("path %s was judged twice" % row["path"])
        if row["path"] not in candidates:
            raise ChoiceError("path %s is not a candidate (%s)" % (row["path"], ", ".join(candidates)))
        if not isinstance(row.get("passed"), bool):
            raise ChoiceError("row %s: passed must be true or false" % row["path"])
        failures = row.get("failures") or []
        if not isinstance(failures, list) or not all(isinstance(f, str) for f in failures):
            raise ChoiceError("row %s: failures must be a list of strings" % row["path"])
        clean = {"path": row["path"], "passed": row["passed"], "failures": failures}
        for key in ("median_tok_s", "bar_tok_s", "baseline_tok_s", "match_rate"):
            clean[key] = _number(row.get(key), "row %s: %s" % (row["path"], key))
        if clean["passed"] and clean["median_tok_s"] is None:
            raise ChoiceError("row %s passed without a median" % row["path"])
        if clean["passed"] and rate_problem(clean["median_tok_s"], "median_tok_s"):
            raise ChoiceError("row %s passed with %s" % (row["path"], rate_problem(clean["median_tok_s"],
                                                                                   "median_tok_s")))
        if clean["match_rate"] is not None and not 0 <= clean["match_rate"] <= 1:
            raise ChoiceError("row %s: match_rate must be from 0 to 1, got %s" % (row["path"], shown(
                clean["match_rate"])))
        by_path[row["path"]] = clean
    missing = [c for c in candidates if c not in by_path]
    if missing:
        raise ChoiceError("no measurement for candidate path(s) %s" % ", ".join(missing))
    return [by_path[c] for c in candidates]


def _figure(row):
    median = "n/a" if row["median_tok_s"] is None else "%.1f tok/s" % row["median_tok_s"]
    match = "" if row["match_rate"] is None else ", match %.0f %%" % (100 * row["match_rate"])
    return "%s %s%s" % (row["path"], median, match)


def choose(rows, candidates):
    """{'winner': path or None, 'why': one line, 'paths': rows}: the fastest path that passed its judgement.

    A tie keeps the path listed first in ``candidates`` (most ambitious first, the order decide() gives).
    """
    rows = normalize_rows(rows, candidates)
    passed = [r for r in rows if r["passed"]]
    rejected = ["%s (%s)" % (_figure(r), "; ".join(r["failures"]) or "failed") for r in rows if not r["passed"]]
    if not passed:
        return {"winner": None, "paths": rows,
                "why": "no path is correct and faster than the baseline by the margin: %s" % " | ".join(rejected)}
    best = max(passed, key=lambda r: (r["median_tok_s"], -candidates.index(r["path"])))
    others = [_figure(r) for r in passed if r is not best]
    why = "%s is the fastest correct path (%s, bar %s)" % (
        best["path"], _figure(best).split(" ", 1)[1],
        "n/a" if best["bar_tok_s"] is None else "%.1f tok/s" % best["bar_tok_s"])
    if others:
        why += "; also passed: %s" % ", ".join(others)
    if rejected:
        why += "; rejected: %s" % " | ".join(rejected)
    return {"winner": best["path"], "paths": rows, "why": why}


def record(choice, candidates, at):
    """The choice file's text (JSON) for a winner; raises ChoiceError without one (nothing to keep)."""
    if not choice.get("winner"):
        raise ChoiceError("no winner to record: %s" % choice.get("why", ""))
    data = {"version": VERSION, "path": choice["winner"], "candidates": list(candidates), "at": at,
            "why": choice["why"], "paths": choice["paths"]}
    try:
        return json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ChoiceError("the choice cannot be recorded (a NaN or infinite number is never recorded): %s" % exc)


def parse(text):
    """(record, problem): the recorded choice, or None with why it cannot be used (None, None: none recorded)."""
    if text is None:
        return None, None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, "the recorded all-reduce choice is not JSON (%s)" % exc
    if not isinstance(data, dict) or isinstance(data.get("version"), bool) or data.get("version") != VERSION:
        return None, "the recorded all-reduce choice has no version %d" % VERSION
    if not isinstance(data.get("path"), str) or not isinstance(data.get("candidates"), list) \
            or not all(isinstance(c, str) for c in data["candidates"]):
        return None, "the recorded all-reduce choice lacks its path or candidates"
    return data, None


def recorded_path(data, problem, candidates):
    """(path, reason): the recorded winner while the candidates are the ones it was measured among, else (None, why)."""
    if data is None:
        return None, problem or "no path measured yet"
    if sorted(data["candidates"]) != sorted(candidates):
        return None, "the candidates changed since the measurement of %s (then %s, now %s): the gate decides again" % (
            data.get("at"), ", ".join(data["candidates"]), ", ".join(candidates))
    if data["path"] not in candidates:
        return None, "the recorded path %s is not a candidate here" % data["path"]
    return data["path"], "the benchmark gate measured it fastest and correct on %s: %s" % (
        data.get("at"), data.get("why", ""))
