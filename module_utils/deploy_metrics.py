# -*- coding: utf-8 -*-
"""What the deployment decided on one host, as a node_exporter textfile (Prometheus text exposition format).

``render(facts)`` writes the text; ``parse(text)`` reads one back (the previous textfile is where a fact this run did
not learn is kept from, and where the counters go on from); ``merge(previous, new)`` keeps every fact the new run
leaves unset; ``count_restarts(log_text)`` counts sglang_server's restarts log. Pure functions, no I/O: the module
(library/sglang_deploy_metrics.py) reads and writes.

Series (no host label: node_exporter's own target identifies the host):

``sglang_deploy_info{sglang_version, flashinfer_version, lock, model_revision} 1``
``sglang_deploy_fused`` 1 when the server's last proven start ran the fused all-reduce (the fusion proof), else 0
``sglang_deploy_allreduce_path_info{path} 1`` the all-reduce path the deploy chose
``sglang_deploy_gate_passed`` the benchmark gate's last verdict (1 passed, 0 failed)
``sglang_deploy_gate_throughput_tokens_per_second``, ``sglang_deploy_gate_baseline_tokens_per_second``,
``sglang_deploy_gate_margin_ratio`` (the gate's margin: it requires throughput >= baseline x (1 + margin)),
``sglang_deploy_gate_accept_length``, ``sglang_deploy_gate_match_ratio`` (greedy completions matching the
baseline's) and ``sglang_deploy_gate_min_match_ratio`` (what the gate requires),
``sglang_deploy_gate_timestamp_seconds``
``sglang_deploy_restarts_total``, ``sglang_deploy_rollbacks_total`` counters
``sglang_deploy_last_deploy_timestamp_seconds``, ``sglang_deploy_last_drift_check_timestamp_seconds``

A fact never learned is left out (no series), never written as a made-up 0. Counters never go down: they are the
restarts log's counts, or the previous textfile's value when that is higher (a truncated log holds the counter until
it counts past it). Every number is finite; label values are text of at most 200 printable characters, escaped.
"""
from __future__ import annotations

import datetime
import re

from ansible.module_utils import fusion_proof
from ansible.module_utils import pkg_versions
from ansible.module_utils.finite_numbers import finite, shown

PREFIX = "sglang_deploy_"
INFO_LABELS = ("sglang_version", "flashinfer_version", "lock", "model_revision")
MAX_LABEL = 200

# name: (type, help, kind) in the order written. kind: "gauge" a number, "flag" 0/1, "count" a whole number.
GAUGES = (
    ("fused", "gauge", "1 when the server's last proven start ran the fused all-reduce (the fusion proof), else 0.",
     "flag"),
    ("gate_passed", "gauge", "The benchmark gate's last verdict: 1 passed, 0 failed (and rolled back).", "flag"),
    ("gate_throughput_tokens_per_second", "gauge", "Median output throughput the benchmark gate last measured.",
     "gauge"),
    ("gate_baseline_tokens_per_second", "gauge", "The baseline throughput the gate last judged against.", "gauge"),
    ("gate_margin_ratio", "gauge", "The gate's margin: it requires throughput >= baseline x (1 + margin).", "gauge"),
    ("gate_accept_length", "gauge", "Median speculative accept length the gate last measured.", "gauge"),
    ("gate_match_ratio", "gauge", "Share of greedy completions matching the baseline's at the last gate (0 to 1).",
     "gauge"),
    ("gate_min_match_ratio", "gauge", "Share of matching greedy completions the gate requires (0 to 1).", "gauge"),
    ("gate_timestamp_seconds", "gauge", "When the gate's last verdict was recorded (Unix time).", "gauge"),
    ("restarts_total", "counter", "Server restarts the roles made (sglang_server's restarts log).", "count"),
    ("rollbacks_total", "counter", "Restarts the benchmark gate made to roll a failed deploy back.", "count"),
    ("last_deploy_timestamp_seconds", "gauge", "When a deploy last converged this host (Unix time).", "gauge"),
    ("last_drift_check_timestamp_seconds", "gauge", "When a drift check last checked this host (Unix time).",
     "gauge"),
)
KINDS = {name: kind for name, _type, _help, kind in GAUGES}
COUNTERS = tuple(name for name, metric_type, _help, _kind in GAUGES if metric_type == "counter")
# Series the parser reads back; anything else in an old file is dropped.
_LINE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
_RESTART = re.compile(r"\S+ start=\S+ ready=\S+ waited_s=\S+ pid=\S+ why=(.*)")
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class MetricsError(Exception):
    """A fact that cannot be written as a metric; the message names it."""


def label_problem(value, what):
    """Why VALUE cannot be a label value (naming WHAT), or None."""
    if not isinstance(value, str):
        return "%s must be text, got %s" % (what, shown(value))
    if not value:
        return "%s is empty" % what
    if len(value) > MAX_LABEL:
        return "%s is longer than %d characters" % (what, MAX_LABEL)
    if not value.isprintable():
        return "%s holds a control character (%s)" % (what, shown(value))
    return None


def escape(value):
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _unescape(value):
    return re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], value)


def number_problem(name, value):
    """Why VALUE cannot be series NAME's value, or None."""
    number = finite(value)
    kind = KINDS[name]
    if number is None:
        return "%s must be a finite number, got %s" % (name, shown(value))
    if kind == "flag" and number not in (0, 1):
        return "%s must be 0 or 1, got %s" % (name, shown(value))
    if kind == "count" and (number < 0 or number != int(number)):
        return "%s must be a whole number, 0 or more, got %s" % (name, shown(value))
    if name.endswith("_ratio") and number < 0:
        return "%s must be 0 or more, got %s" % (name, shown(value))
    if name.endswith("_tokens_per_second") and number < 0:
        return "%s must be 0 or more, got %s" % (name, shown(value))
    return None


def check(facts):
    """Every problem in FACTS (a mapping: ``info`` a mapping of INFO_LABELS, ``allreduce_path`` text, each series
    name of GAUGES a number or None); an empty list when all can be written."""
    problems = []
    if not isinstance(facts, dict):
        return ["the facts must be a mapping, got %s" % shown(facts)]
    unknown = sorted(set(facts) - set(KINDS) - {"info", "allreduce_path"})
    if unknown:
        problems.append("unknown facts: %s" % ", ".join(unknown))
    info = facts.get("info")
    if info is not None:
        if not isinstance(info, dict) or set(info) != set(INFO_LABELS):
            problems.append("info must hold exactly %s" % ", ".join(INFO_LABELS))
        else:
            problems += [p for p in (label_problem(info[k], "info's " + k) for k in INFO_LABELS) if p]
    path = facts.get("allreduce_path")
    if path is not None:
        problems += [p for p in [label_problem(path, "allreduce_path")] if p]
    for name in KINDS:
        if facts.get(name) is not None:
            problems += [p for p in [number_problem(name, facts[name])] if p]
    return problems


def _number(value):
    number = float(value)
    if number == int(number) and abs(number) < 2 ** 53:
        return "%d" % number
    return repr(number)


def render(facts):
    """The textfile for FACTS (see check); MetricsError when one cannot be written."""
    problems = check(facts)
    if problems:
        raise MetricsError("; ".join(problems))
    lines = []
    info = facts.get("info")
    if info is not None:
        lines += ["# HELP %sinfo The releases, lock and model revision the deploy left on this host." % PREFIX,
                  "# TYPE %sinfo gauge" % PREFIX,
                  "%sinfo{%s} 1" % (PREFIX, ",".join('%s="%s"' % (k, escape(info[k])) for k in INFO_LABELS))]
    if facts.get("allreduce_path") is not None:
        lines += ["# HELP %sallreduce_path_info The all-reduce path the deploy chose for the server." % PREFIX,
                  "# TYPE %sallreduce_path_info gauge" % PREFIX,
                  '%sallreduce_path_info{path="%s"} 1' % (PREFIX, escape(facts["allreduce_path"]))]
    for name, metric_type, help_text, _kind in GAUGES:
        if facts.get(name) is None:
            continue
        lines += ["# HELP %s%s %s" % (PREFIX, name, help_text), "# TYPE %s%s %s" % (PREFIX, name, metric_type),
                  "%s%s %s" % (PREFIX, name, _number(facts[name]))]
    return "\n".join(lines) + "\n" if lines else ""


def parse(text):
    """The facts a textfile this module wrote holds (what ``render`` took); an unreadable or foreign line is left
    out, so a damaged file loses those facts and never stops a deploy. None or empty text: no facts."""
    facts = {}
    for line in (text or "").splitlines():
        match = _LINE.fullmatch(line.strip())
        if not match or not match.group(1).startswith(PREFIX):
            continue
        name, labels_text, value = match.group(1)[len(PREFIX):], match.group(2) or "", match.group(3)
        labels = dict((k, _unescape(v)) for k, v in _LABEL.findall(labels_text))
        if name == "info" and set(labels) == set(INFO_LABELS):
            facts["info"] = {k: labels[k] for k in INFO_LABELS}
        elif name == "allreduce_path_info" and set(labels) == {"path"}:
            facts["allreduce_path"] = labels["path"]
        elif name in KINDS and not labels_text:
            try:
                number = float(value)
            except ValueError:
                continue
            if number_problem(name, number) is None:
                facts[name] = int(number) if KINDS[name] in ("flag", "count") else number
    return {k: v for k, v in facts.items() if not check({k: v})}


def count_restarts(log_text):
    """(restarts, rollbacks) in sglang_server's restarts log: one line a restart, ``why=rollback`` for the benchmark
    gate's rollbacks. Lines of another shape are not counted."""
    restarts = rollbacks = 0
    for line in (log_text or "").splitlines():
        match = _RESTART.fullmatch(line.strip())
        if match:
            restarts += 1
            rollbacks += match.group(1).strip() == "rollback"
    return restarts, rollbacks


def merge(previous, new):
    """The facts to write: NEW's, with each one NEW leaves unset (None or absent) kept from PREVIOUS, and each counter
    the higher of the two (a counter never goes down)."""
    merged = dict(previous)
    merged.update({k: v for k, v in new.items() if v is not None})
    for name in COUNTERS:
        values = [v for v in (previous.get(name), new.get(name)) if v is not None]
        if values:
            merged[name] = max(values)
    return merged


def timestamp(value):
    """VALUE (Unix seconds, or an ISO 8601 time with its offset, as the records write) as Unix seconds, or None."""
    number = finite(value)
    if number is not None:
        return number if number >= 0 else None
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None  # a time without its offset could be any of 27 hours
    return moment.timestamp()


def gate_facts(verdict):
    """The gate's series from its recorded verdict (gate_verdict.parse's result; None: no verdict, no series). A
    figure the verdict does not hold (an older verdict without the accept length) is left out."""
    if verdict is None:
        return {}
    details = verdict.get("details") if isinstance(verdict.get("details"), dict) else {}
    figures = details.get("verdict") if isinstance(details.get("verdict"), dict) else {}
    margin = finite(figures.get("margin_pct"))
    facts = {
        "gate_passed": 1 if verdict["passed"] is True else 0,
        "gate_throughput_tokens_per_second": finite(figures.get("median_tok_s")),
        "gate_baseline_tokens_per_second": finite(figures.get("baseline_tok_s")),
        "gate_margin_ratio": None if margin is None else margin / 100.0,
        "gate_accept_length": finite(details.get("accept_length")),
        "gate_match_ratio": finite(details.get("match_rate")),
        "gate_min_match_ratio": finite(details.get("min_match_rate")),
        "gate_timestamp_seconds": timestamp(verdict.get("at")),
    }
    return {k: v for k, v in facts.items() if v is not None and number_problem(k, v) is None}


TIMESTAMPS = ("last_deploy_timestamp_seconds", "last_drift_check_timestamp_seconds")


def differs(old_text, new_text):
    """Whether NEW_TEXT says more than OLD_TEXT than a later deploy or drift-check time: a run that changed nothing
    else leaves the file (and its changed count) alone. No old file: it differs."""
    if old_text is None:
        return True
    old, new = parse(old_text), parse(new_text)
    for name in TIMESTAMPS:
        if name in old and name in new:
            new[name] = old[name]
    return old != new or render(new) != old_text


def fused_from_unit(unit_text):
    """1 when the unit passes a fusion flag to more than one rank (the fusion proof's ``fusion_expected``), else 0.
    Every start of such a unit is proven fused by sglang_server or fails, so for the unit a deploy leaves running this
    is the proof's answer. MetricsError for a unit the proof cannot read."""
    try:
        expected, _why = fusion_proof.fusion_expected(fusion_proof.unit_settings(fusion_proof.exec_start_args(
            unit_text)))
    except fusion_proof.ProofInputError as exc:
        raise MetricsError("the server's unit: %s" % exc)
    return 1 if expected else 0


def release_info(versions, lock, model_revision):
    """The info labels from a venv's installed VERSIONS (pkg_versions.installed_versions), its LOCK id and the
    model's revision. A package the venv does not hold is ``none`` (a label says so rather than the deploy failing
    over a metric); MetricsError when the lock or the revision is missing."""
    info = {"sglang_version": pkg_versions.find_distribution(versions, "sglang") or "none",
            "flashinfer_version": pkg_versions.find_distribution(versions, "flashinfer-python") or "none",
            "lock": lock, "model_revision": model_revision}
    missing = sorted(key for key, value in info.items() if not value)
    if missing:
        raise MetricsError("cannot tell the %s" % ", ".join(missing))
    return info
