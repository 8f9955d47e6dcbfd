#!/usr/bin/env python3
"""The series the fleet's Grafana dashboard and alert rules read, and whether a Prometheus holds them.

    scripts/prometheus_series.py                      # list each metric and the panels, variables and rules using it
    scripts/prometheus_series.py --url http://127.0.0.1:9090 \\
        --expect instance=gpu1:9100,gpu2:9100 \\
        --expect sglang::instance=gpu1:30000,gpu2:30000 \\
        --expect up:instance=gpu1:30000,gpu2:30000,gpu1:9100,gpu2:9100 \\
        --expect sglang_drift_:host=gpu1,gpu2 \\
        --expect sglang_drift_last_run_timestamp_seconds:instance=*

Each --expect [PREFIX:]LABEL=V1,V2 says which values of LABEL the series of every metric whose name starts with
PREFIX must have (the longest PREFIX that matches wins; no PREFIX: every metric no other --expect matches); `*` for
the values asks only for a series. A metric no --expect matches must have a series. Exit 0 when every metric has
what was asked, 1 naming what is missing, 2 when Prometheus could not be asked. Needs PyYAML (Ansible's own
dependency) for the rules file.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import yaml

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # loaded by path, not run: find the siblings
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from prometheus_api import PrometheusError, instant  # noqa: E402  pylint: disable=wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(REPO, "monitoring", "grafana", "sglang-fleet.json")
RULES = os.path.join(REPO, "monitoring", "prometheus", "sglang-alerts.yml")

_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# A number (decimal, hex, exponent) with what may follow it in a duration (5m, 1h30m) or a number's Inf/NaN.
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[a-zA-Z0-9_]*")
_NAME_MATCHER = re.compile(r"""__name__\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|`([^`]*)`)""")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
             "group_right", "atan2", "inf", "nan"}
_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}  # keywords a (label, ...) list may follow
_AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
                 "quantile", "limitk", "limit_ratio"}
_CLOSING = {"{": "}", "[": "]", "(": ")"}


class ExpressionError(ValueError):
    """An expression this reader cannot take apart (an unclosed string, brace or bracket)."""


def _string_end(expr, start):
    """The index after the string literal that starts at START."""
    quote, index = expr[start], start + 1
    while index < len(expr):
        if expr[index] == "\\" and quote != "`":
            index += 2
            continue
        if expr[index] == quote:
            return index + 1
        index += 1
    raise ExpressionError("unclosed string in %r" % expr)


def _group_end(expr, start):
    """The index after the {...}, [...] or (...) that opens at START, strings inside skipped."""
    opening, closing, index, depth = expr[start], _CLOSING[expr[start]], start, 0
    while index < len(expr):
        char = expr[index]
        if char in "\"'`":
            index = _string_end(expr, index)
            continue
        depth += char == opening
        depth -= char == closing
        index += 1
        if depth == 0:
            return index
    raise ExpressionError("unclosed %r in %r" % (opening, expr))


def _next_char(expr, index):
    """The first character at or after INDEX that is not blank or a comment, and its index."""
    while index < len(expr):
        if expr[index].isspace():
            index += 1
        elif expr[index] == "#":
            newline = expr.find("\n", index)
            index = len(expr) if newline < 0 else newline + 1
        else:
            return expr[index], index
    return "", index


def metric_names(expr):
    """The metric names PromQL EXPR reads, in order, once per read: every identifier that is not a function
    or aggregation's name, a keyword, a label (in {...} matchers or by/without/on/ignoring/group_left lists), in a
    string, a duration or a number; and the name of a {__name__="..."} selector."""
    names, index = [], 0
    while True:
        char, index = _next_char(expr, index)
        if not char:
            return names
        if char in "\"'`":
            index = _string_end(expr, index)
        elif char in "{[":
            end = _group_end(expr, index)
            if char == "{":
                names += ["".join(found) for found in _NAME_MATCHER.findall(expr[index:end])]
            index = end
        elif char.isdigit() or (char == "." and expr[index + 1:index + 2].isdigit()):
            index = _NUMBER.match(expr, index).end()
        elif _IDENTIFIER.match(char):
            word = _IDENTIFIER.match(expr, index).group(0)
            index += len(word)
            following, after = _next_char(expr, index)
            lowered = word.lower()
            if lowered in _LISTS and following == "(":
                index = _group_end(expr, after)
            elif lowered in _KEYWORDS or following == "(":
                pass  # a keyword, or a function's or aggregation's name
            elif lowered in _AGGREGATIONS and _IDENTIFIER.match(expr, after) and \
                    _IDENTIFIER.match(expr, after).group(0).lower() in ("by", "without"):
                pass  # sum by (...) (...)
            else:
                names.append(word)
        else:
            index += 1  # an operator, a paren, a comma, @


def _targets_of(panel):
    return [target["expr"] for target in panel.get("targets") or [] if isinstance(target, dict)
            and isinstance(target.get("expr"), str) and target["expr"].strip()]


def dashboard_panels(dashboard):
    """The panels of DASHBOARD that show data, in its order, rows' nested (collapsed) panels included: the rows
    themselves are left out."""
    found = []
    for panel in dashboard.get("panels") or []:
        if not isinstance(panel, dict):
            continue
        if panel.get("type") != "row":
            found.append(panel)
        found += [inner for inner in panel.get("panels") or []
                  if isinstance(inner, dict) and inner.get("type") != "row"]
    return found


def _variable_query(variable):
    """The PromQL a query variable evaluates: label_values(EXPR, label)'s EXPR, or the query itself."""
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    if not isinstance(query, str) or not query.strip():
        return None
    match = re.fullmatch(r"\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*", query, re.S)
    if match:
        return match.group(1)
    if re.fullmatch(r"\s*label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*", query):
        return None
    match = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
    return match.group(1) if match else query


def dashboard_expressions(dashboard):
    """[(where, expr)...]: each panel target's expression ("panel TITLE") and each query variable's
    ("variable NAME")."""
    found = [("panel %s" % panel.get("title", "(untitled)"), expr)
             for panel in dashboard_panels(dashboard) for expr in _targets_of(panel)]
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if isinstance(variable, dict) and variable.get("type") == "query" and _variable_query(variable):
            found.append(("variable %s" % variable.get("name"), _variable_query(variable)))
    return found


def rules_expressions(rules):
    """[(where, expr)...]: each alerting ("alert NAME") and recording ("record NAME") rule's expression."""
    found = []
    for group in (rules or {}).get("groups") or []:
        for rule in (group or {}).get("rules") or []:
            if isinstance(rule, dict) and isinstance(rule.get("expr"), str):
                where = "alert %s" % rule["alert"] if "alert" in rule else "record %s" % rule.get("record")
                found.append((where, rule["expr"]))
    return found


def metric_uses(expressions):
    """{metric: [(where, expr)...]} for [(where, expr)...], metrics in name order."""
    uses = {}
    for where, expr in expressions:
        for name in dict.fromkeys(metric_names(expr)):
            uses.setdefault(name, []).append((where, " ".join(expr.split())))
    return dict(sorted(uses.items()))


def load_uses(dashboard_path=DASHBOARD, rules_path=RULES):
    """metric_uses of the dashboard JSON and the rules YAML at those paths."""
    with open(dashboard_path, encoding="utf-8") as handle:
        dashboard = json.load(handle)
    with open(rules_path, encoding="utf-8") as handle:
        rules = yaml.safe_load(handle)
    if not isinstance(dashboard, dict) or not isinstance(rules, dict):
        raise ValueError("%s or %s is not a dashboard and a rules file" % (dashboard_path, rules_path))
    return metric_uses(dashboard_expressions(dashboard) + rules_expressions(rules))


def parse_expect(text):
    """(prefix, label, values) of an --expect [PREFIX:]LABEL=V1,V2 (values None for `*`)."""
    head, equals, tail = text.partition("=")
    prefix, _, label = head.rpartition(":")
    values = [value.strip() for value in tail.split(",") if value.strip()]
    if not equals or not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", label) or not values:
        raise ValueError("--expect %r is not [PREFIX:]LABEL=V1,V2 (or LABEL=*)" % text)
    if prefix and not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", prefix):
        raise ValueError("--expect %r: %r is not the start of a metric name" % (text, prefix))
    return prefix, label, None if values == ["*"] else values


def expectation(metric, expects):
    """The (label, values) of the longest prefix in EXPECTS [(prefix, label, values)...] that METRIC starts with;
    (None, None) where none does (a series, any labels)."""
    matching = [(len(prefix), label, values) for prefix, label, values in expects if metric.startswith(prefix)]
    if not matching:
        return None, None
    _, label, values = max(matching, key=lambda item: item[0])
    return label, values


def check(url, metrics, expects, time=None, timeout=10.0):
    """[(metric, label, expected, found, missing)...] for each of METRICS against the Prometheus at URL: found the
    LABEL values its series have (count by (LABEL)), missing the expected ones it lacks (["(no series)"] where a
    series was all that was asked and there is none). Raises PrometheusError when Prometheus cannot be asked."""
    rows = []
    for metric in metrics:
        label, values = expectation(metric, expects)
        selector = '{__name__="%s"}' % metric
        if label is None:
            result = instant(url, "count(%s)" % selector, time, timeout)
            found = []
        else:
            result = instant(url, "count by (%s) (%s)" % (label, selector), time, timeout)
            found = sorted(labels.get(label, "") for labels, _ in result)
        if values is None:
            missing = [] if result else ["(no series)"]
        else:
            missing = [value for value in values if value not in found]
        rows.append((metric, label or "", values, found, missing))
    return rows


def table(rows):
    """The check's rows as an aligned text table."""
    lines = [("metric", "label", "expected", "found", "missing")]
    for metric, label, values, found, missing in rows:
        lines.append((metric, label or "-", "*" if values is None else ",".join(values),
                      ",".join(value or '""' for value in found) or "-", ",".join(missing) or "-"))
    widths = [max(len(line[column]) for line in lines) for column in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(line[:4], widths)) + "  " + line[4]
                     for line in lines)


def _listing(uses):
    lines = []
    for metric, places in uses.items():
        lines.append(metric)
        lines += ["    %s: %s" % (where, expr) for where, expr in places]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], epilog=__doc__.split("\n\n", 2)[2],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="the Prometheus to check (without: list the metrics and where they are read)")
    parser.add_argument("--expect", action="append", default=[], metavar="[PREFIX:]LABEL=V1,V2",
                        help="values of LABEL the metrics starting with PREFIX must have (repeatable)")
    parser.add_argument("--time", type=float, help="evaluate at this Unix time (default: Prometheus' now)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per query (default 10)")
    parser.add_argument("--dashboard", default=DASHBOARD, help="the dashboard JSON (default: the collection's)")
    parser.add_argument("--rules", default=RULES, help="the alert rules YAML (default: the collection's)")
    args = parser.parse_args(argv)
    try:
        expects = [parse_expect(text) for text in args.expect]
        uses = load_uses(args.dashboard, args.rules)
    except (OSError, ValueError, yaml.YAMLError) as error:
        print("prometheus_series: %s" % error, file=sys.stderr)
        return 2
    if args.url is None:
        print(_listing(uses))
        return 0
    try:
        rows = check(args.url, list(uses), expects, args.time, args.timeout)
    except PrometheusError as error:
        print("prometheus_series: %s" % error, file=sys.stderr)
        return 2
    print(table(rows))
    missing = [(metric, label, lost) for metric, label, _, _, lost in rows if lost]
    for metric, label, lost in missing:
        print("MISSING %s: %s" % (metric, ", ".join(lost) if not label or lost == ["(no series)"]
                                  else ", ".join("%s=%s" % (label, value) for value in lost)))
    print("%d of %d metrics have every series asked for" % (len(rows) - len(missing), len(rows)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
