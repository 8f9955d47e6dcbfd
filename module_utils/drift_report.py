# -*- coding: utf-8 -*-
"""Drift report: turn a check-mode run of the drift playbook into a verdict per host.

    ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.posix.json \\
        ansible-playbook playbooks/drift.yml --check --diff -i inventories/lab > out.json
    scripts/drift_report.py out.json [--json report.json] [--prom sglang_drift.prom] \\
        [--report-dir reports/drift --keep 30] [--diff-lines 20] [--quiet]

The same logic runs as the sglang_drift_report module (library/), which is how an installed collection uses it.

The input is what the ``ansible.posix.json`` stdout callback prints:
``{"plays": [{"play": {...}, "tasks": [{"task": {"name", "id", ...}, "hosts": {host: result}}]}],
"stats": {host: {"ok", "changed", "failures", "unreachable", "skipped", "rescued", "ignored"}}}``.
Standard library only; every step is a pure function (``analyse``, ``render_text``, ``render_prom``, ...) so it can
be imported and tested; ``main`` only reads, writes and exits.

Host status (worst first)
-------------------------
``unreachable``  the recap counts an unreachable task for the host;
``error``        the recap counts a failure (Ansible already leaves out failures of tasks with ``ignore_errors``
                 and failures a ``rescue`` handled), or the run has no recap for the host (cut short);
``drift``        a task result says ``changed: true`` (in check mode: "a deploy would change this"), or a drift
                 probe found a difference;
``clean``        none of that.

The callback does not say which failed result was ignored or rescued, only how many failures counted: for a host
with N counted failures the last N failed results are its errors (a failure that counts ends the host's run, so
the counted ones come last); earlier failed results are reported as ``ignored_failures`` only.

Exit code: 0 every host clean, 1 drift somewhere (and no error), 2 an error or an unreachable host anywhere, or an
input that is not a run (no hosts, not JSON).

Items, categories and probes
----------------------------
module_utils/drift_items.py makes the items (one per changed result, probe finding, counted failure and
unreachable host) and says the convention a drift probe follows; module_utils/drift_categories.py files each
item under a category.

Outputs
-------
stdout: one line per host (status and counts, or the first error), then each item with its summary and diff, then
the verdict: how many hosts had each status, and what the exit code means.
``--json FILE``: the report (``generated_at``, ``timestamp``, ``status``, ``exit_code``, ``run``, ``hosts``: per
host ``status``, ``stats``, ``counts`` per category, ``errors``, ``items``, ``checks``, ``ignored_failures``;
``items``: every host's items, each with ``host``, ``task``, ``kind`` (change, probe, error, unreachable),
``category``, ``summary``, ``diff`` (lines), ``diff_omitted``, ``counted`` (counts as drift), and ``paths`` for
changes, ``item``/``expected``/``actual``/``secondary`` for probes).
``--prom FILE``: a node_exporter textfile: ``sglang_drift_status{host}`` (0 clean, 1 drift, 2 error,
3 unreachable), ``sglang_drift_items{host,category}`` (every category, zeros included, so series stay stable),
``sglang_drift_last_run_timestamp_seconds``. ``--report-dir DIR --keep N``: the report as
``DIR/drift-<UTC timestamp>.json`` (for a scheduler), then only the N newest such files are kept. Every file is
written to a temporary file in the same directory, fsynced and renamed into place.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import sys

from ansible.module_utils import atomic_files
from ansible.module_utils import drift_items as di
from ansible.module_utils.drift_categories import CATEGORIES

STATUS_VALUES = {"clean": 0, "drift": 1, "error": 2, "unreachable": 3}
EXIT_CODES = {"clean": 0, "drift": 1, "error": 2, "unreachable": 2}
# What each exit code says, for the verdict line (a code is not a count).
EXIT_MEANINGS = {0: "every host clean", 1: "a host drifted, none failed or was unreachable",
                 2: "a host failed or was unreachable, or no host ran"}
DEFAULT_KEEP = 30
REPORT_NAME = re.compile(r"^drift-\d{8}T\d{6}Z(?:-\d+)?\.json$")


# ---------------------------------------------------------------------------------------------------------------
# Reading the run


# Deeper than any result the callback writes (a diff of nested mappings is about ten levels), and far below
# Python's recursion limit, which the report's own walks (JSON comparison, rendering) must stay under.
MAX_DEPTH = 100
_STAT_KEYS = ("ok", "changed", "failures", "unreachable", "skipped", "rescued", "ignored")


def load_run(text):
    """The callback's JSON from TEXT. Anything printed before it (a stray warning on stdout) is skipped. Raises
    ValueError, naming the first places, for anything else: not JSON, or JSON of another shape."""
    try:
        run = json.loads(text)
    except RecursionError:
        raise ValueError("not the output of the ansible.posix.json callback: nested too deeply to read")
    except ValueError:
        run = None
        decoder = json.JSONDecoder()
        for match in re.finditer(r"^\{", text, re.MULTILINE):
            try:
                run, _end = decoder.raw_decode(text, match.start())
                break
            except RecursionError:
                raise ValueError("not the output of the ansible.posix.json callback: nested too deeply to read")
            except ValueError:
                continue
    if not isinstance(run, dict) or "plays" not in run:
        raise ValueError("not the output of the ansible.posix.json callback (no 'plays')")
    problems = shape_problems(run)
    if problems:
        raise ValueError("not the output of the ansible.posix.json callback: %s%s" % (
            "; ".join(problems[:5]), " (and %d more)" % (len(problems) - 5) if len(problems) > 5 else ""))
    return run


def _depth_over(value, limit):
    """Whether VALUE nests deeper than LIMIT (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((item, depth + 1) for item in node.values())
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
    return False


def _optional(container, key, kind, where, problems, what):
    """container[key] when it is absent, null or of KIND; else a problem is noted and None returned."""
    value = container.get(key)
    if value is None or isinstance(value, kind) and not isinstance(value, bool):
        return value
    problems.append("%s%s must be %s (got %s)" % (where, key, what, type(value).__name__))
    return None


def shape_problems(run):
    """Where RUN differs from the shape the ansible.posix.json callback writes, for every part the report reads:
    plays, their play and tasks, each task's name, path and hosts (each host's result a mapping), play durations,
    and stats (per host a mapping of counts, each a whole number 0 or more). A result's own content is a module's
    and may be anything: the report reads it defensively."""
    problems = []
    if _depth_over(run, MAX_DEPTH):
        return ["nested deeper than %d levels" % MAX_DEPTH]
    plays = _optional(run, "plays", list, "", problems, "a list")
    for index, play in enumerate(plays or []):
        where = "plays[%d]" % index
        if not isinstance(play, dict):
            problems.append("%s must be a mapping (got %s)" % (where, type(play).__name__))
            continue
        meta = _optional(play, "play", dict, where + ".", problems, "a mapping") or {}
        _optional(meta, "name", str, where + ".play.", problems, "text")
        duration = _optional(meta, "duration", dict, where + ".play.", problems, "a mapping") or {}
        for key in ("start", "end"):
            _optional(duration, key, str, where + ".play.duration.", problems, "text")
        for number, task in enumerate(_optional(play, "tasks", list, where + ".", problems, "a list") or []):
            at = "%s.tasks[%d]" % (where, number)
            if not isinstance(task, dict):
                problems.append("%s must be a mapping (got %s)" % (at, type(task).__name__))
                continue
            info = _optional(task, "task", dict, at + ".", problems, "a mapping") or {}
            for key in ("name", "path"):
                _optional(info, key, str, at + ".task.", problems, "text")
            hosts = _optional(task, "hosts", dict, at + ".", problems, "a mapping") or {}
            for host in sorted(hosts):
                if not isinstance(hosts[host], dict):
                    problems.append("%s.hosts.%s must be a mapping (a result; got %s)"
                                    % (at, host, type(hosts[host]).__name__))
    stats = _optional(run, "stats", dict, "", problems, "a mapping")
    for host in sorted(stats or {}):
        counts = stats[host]
        if not isinstance(counts, dict):
            problems.append("stats.%s must be a mapping (got %s)" % (host, type(counts).__name__))
            continue
        for key in _STAT_KEYS:
            count = counts.get(key)
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
                problems.append("stats.%s.%s must be a whole number, 0 or more (got %r)" % (host, key, count))
    return problems


def iter_results(run):
    """(play name, task name, task path, host, result) in the order the callback recorded them."""
    for play in run.get("plays") or []:
        play_name = (play.get("play") or {}).get("name") or ""
        for task in play.get("tasks") or []:
            name = (task.get("task") or {}).get("name") or ""
            path = (task.get("task") or {}).get("path") or ""
            for host, result in sorted((task.get("hosts") or {}).items()):
                if isinstance(result, dict):
                    yield play_name, name, path, host, result


def run_window(run):
    """First play start and last play end the callback recorded (ISO strings or None)."""
    starts, ends = [], []
    for play in run.get("plays") or []:
        duration = (play.get("play") or {}).get("duration") or {}
        if duration.get("start"):
            starts.append(duration["start"])
        if duration.get("end"):
            ends.append(duration["end"])
    return (min(starts) if starts else None), (max(ends) if ends else None)


# ---------------------------------------------------------------------------------------------------------------
# The verdict per host


def analyse(run, max_diff_lines=di.DEFAULT_DIFF_LINES):
    """{host: {status, stats, counts, items, checks, ignored_failures}} for every host of RUN."""
    stats = run.get("stats") or {}
    per_host = {}
    for host in stats:
        per_host.setdefault(host, [])
    for _play, task_name, task_path, host, result in iter_results(run):
        per_host.setdefault(host, []).append((task_name, task_path, result))

    hosts = {}
    for host in sorted(per_host):
        results = per_host[host]
        host_stats = stats.get(host)
        items, checks, failed, unreachable = [], [], [], []
        for task_name, task_path, result in results:
            if result.get("unreachable"):
                unreachable.append(di.failure_item(host, task_name, task_path, result, "unreachable"))
                continue
            if result.get("failed"):
                failed.append(di.failure_item(host, task_name, task_path, result, "error"))
                continue
            if di.is_probe(result):
                for finding in di.probe_findings(task_name, result):
                    checks.append(dict(finding, task=task_name))
                    if finding["drifted"]:
                        items.append(di.probe_item(host, task_name, finding, max_diff_lines))
                continue
            items.extend(di.change_items(host, task_name, result, max_diff_lines, task_path))

        primary = [item for item in items if not item.get("secondary")]
        for item in items:
            item["counted"] = not (item.get("secondary") and primary)

        if host_stats is None:
            counted = failed
            counted_failures = failed or [di.bare_error(host, "no recap for this host: the run was cut short")]
        else:
            n_failures = int(host_stats.get("failures") or 0)
            counted = failed[len(failed) - n_failures:] if 0 < n_failures <= len(failed) else failed[:n_failures]
            counted_failures = list(counted)
            if n_failures > len(failed):
                counted_failures.append(di.bare_error(
                    host, "%d failure(s) without a task result" % (n_failures - len(failed))))

        if (host_stats or {}).get("unreachable") or (host_stats is None and unreachable):
            status = "unreachable"
        elif counted_failures:
            status = "error"
        elif any(item["counted"] for item in items):
            status = "drift"
        else:
            status = "clean"

        counts = {}
        for item in items:
            if item["counted"]:
                counts[item["category"]] = counts.get(item["category"], 0) + 1
        hosts[host] = {
            "status": status,
            "stats": host_stats or {},
            "counts": counts,
            "items": (unreachable if status == "unreachable" else []) + counted_failures + items,
            "errors": [item["summary"] for item in (unreachable if status == "unreachable" else []) + counted_failures],
            "checks": checks,
            "ignored_failures": len(failed) - len(counted),
        }
    return hosts


def overall_status(hosts):
    """The worst host status; 'error' when there is no host at all."""
    if not hosts:
        return "error"
    return max((info["status"] for info in hosts.values()), key=lambda status: STATUS_VALUES[status])


def exit_code(hosts):
    return EXIT_CODES[overall_status(hosts)]


def build_report(run, now, max_diff_lines=di.DEFAULT_DIFF_LINES, source=None):
    """The JSON report: generated_at, timestamp, status, exit_code, run window, hosts, items."""
    hosts = analyse(run, max_diff_lines)
    start, end = run_window(run)
    return {
        "generated_at": now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "timestamp": now.timestamp(),
        "source": source,
        "status": overall_status(hosts),
        "exit_code": exit_code(hosts),
        "run": {"start": start, "end": end,
                "plays": [(play.get("play") or {}).get("name") or "" for play in run.get("plays") or []]},
        "hosts": hosts,
        "items": [item for info in hosts.values() for item in info["items"]],
    }


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def _host_detail(info):
    if info["status"] in ("unreachable", "error"):
        return info["errors"][0] if info["errors"] else ""
    if info["status"] == "drift":
        return ", ".join("%s %d" % (category, info["counts"][category])
                         for category in CATEGORIES if category in info["counts"])
    return ""


def render_text(report):
    """Human summary: one line per host, then each item (summary, diff)."""
    hosts = report["hosts"]
    width = max([len(host) for host in hosts] + [4])
    lines = []
    for host, info in hosts.items():
        lines.append(("%-*s  %-11s  %s" % (width, host, info["status"], di.shorten(_host_detail(info), 160))).rstrip())
    if not hosts:
        lines.append("no hosts in this run")
    details = report["items"]
    if details:
        lines.append("")
    for item in details:
        tag = item["category"] if item["counted"] else item["category"] + ", not counted"
        if item["kind"] in ("error", "unreachable"):
            tag = item["kind"]
        lines.append("%s [%s] %s" % (item["host"], tag, item["task"] or "-"))
        if item["summary"]:
            lines.append("    " + item["summary"])
        for line in item["diff"]:
            lines.append("    " + line)
        if item["diff_omitted"]:
            lines.append("    ... %d more diff line(s)" % item["diff_omitted"])
    lines.append("")
    lines.append(verdict_line(report))
    return "\n".join(lines) + "\n"


def verdict_line(report):
    """The run in one line: the worst status, how many hosts had each status, and what the exit code means, e.g.
    'drift: 2 hosts, 1 clean, 1 drift; exit code 1 (a host drifted, none failed or was unreachable)'."""
    hosts = report["hosts"]
    tally = {}
    for info in hosts.values():
        tally[info["status"]] = tally.get(info["status"], 0) + 1
    if hosts:
        counted = "%d host%s, %s" % (len(hosts), "" if len(hosts) == 1 else "s", ", ".join(
            "%d %s" % (tally[status], status) for status in STATUS_VALUES if status in tally))
    else:
        counted = "no hosts"
    return "%s: %s; exit code %d (%s)" % (report["status"], counted, report["exit_code"],
                                          EXIT_MEANINGS[report["exit_code"]])


def _label_value(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_prom(report):
    """Prometheus text exposition (node_exporter textfile collector)."""
    lines = [
        "# HELP sglang_drift_status Last drift check per host: 0 clean, 1 drift, 2 error, 3 unreachable.",
        "# TYPE sglang_drift_status gauge",
    ]
    for host, info in report["hosts"].items():
        lines.append('sglang_drift_status{host="%s"} %d' % (_label_value(host), STATUS_VALUES[info["status"]]))
    lines += [
        "# HELP sglang_drift_items Drift items per host and category found by the last drift check.",
        "# TYPE sglang_drift_items gauge",
    ]
    for host, info in report["hosts"].items():
        for category in CATEGORIES:
            lines.append('sglang_drift_items{host="%s",category="%s"} %d' % (
                _label_value(host), category, info["counts"].get(category, 0)))
    lines += [
        "# HELP sglang_drift_last_run_timestamp_seconds When the last drift report was made (Unix time).",
        "# TYPE sglang_drift_last_run_timestamp_seconds gauge",
        "sglang_drift_last_run_timestamp_seconds %.3f" % report["timestamp"],
    ]
    return "\n".join(lines) + "\n"


def _json_safe(value):
    """VALUE with every non-finite number written as text ("nan", "inf"): a probe's expected or actual value may be
    one (the callback writes NaN), and the report stays JSON every reader takes."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def render_json(report):
    return json.dumps(_json_safe(report), indent=2, sort_keys=True, default=str, allow_nan=False) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Files


def write_atomic(path, text, mode=0o644):
    """Write TEXT to PATH atomically (module_utils/atomic_files.py: a temporary file in the same directory, fsync,
    rename, directory fsync); an existing file keeps its mode and owner, a new one gets MODE."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_files.write_atomic(path, text.encode("utf-8"), mode=mode)


def report_name(now, existing=()):
    """drift-YYYYmmddTHHMMSSZ.json, with -N added when that name is taken."""
    base = "drift-" + now.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name, suffix = base + ".json", 1
    while name in existing:
        name = "%s-%d.json" % (base, suffix)
        suffix += 1
    return name


def prune_reports(directory, keep):
    """Remove all but the KEEP newest drift-*.json reports in DIRECTORY (by name); returns the removed paths."""
    names = sorted((name for name in os.listdir(directory) if REPORT_NAME.match(name)), key=_report_sort_key)
    doomed = names[:-keep] if keep > 0 else names
    removed = []
    for name in doomed:
        path = os.path.join(directory, name)
        os.unlink(path)
        removed.append(path)
    return removed


def _report_sort_key(name):
    match = re.match(r"^drift-(\d{8}T\d{6}Z)(?:-(\d+))?\.json$", name)
    return match.group(1), int(match.group(2) or 0)


def save_to_dir(report, directory, keep, now):
    """Write the report as DIRECTORY/drift-<timestamp>.json, then prune; returns (path, removed)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, report_name(now, set(os.listdir(directory))))
    write_atomic(path, render_json(report))
    return path, prune_reports(directory, keep)


# ---------------------------------------------------------------------------------------------------------------
# CLI


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Drift verdict per host from a check-mode run of the drift playbook (ansible.posix.json "
                    "callback output). Exit 0 clean, 1 drift, 2 error or unreachable.")
    parser.add_argument("input", help="the callback's JSON output ('-' for stdin)")
    parser.add_argument("--json", metavar="FILE", help="write the JSON report here")
    parser.add_argument("--prom", metavar="FILE", help="write a Prometheus textfile here (node_exporter)")
    parser.add_argument("--report-dir", metavar="DIR", help="write a timestamped JSON report into DIR")
    parser.add_argument("--keep", type=int, default=DEFAULT_KEEP, metavar="N",
                        help="with --report-dir: keep the N newest reports (default %d)" % DEFAULT_KEEP)
    parser.add_argument("--diff-lines", type=int, default=di.DEFAULT_DIFF_LINES, metavar="N",
                        help="diff lines per item (default %d, 0: all)" % di.DEFAULT_DIFF_LINES)
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary on stdout")
    args = parser.parse_args(argv)
    if args.keep < 1:
        parser.error("--keep must be 1 or more")
    if args.diff_lines < 0:
        parser.error("--diff-lines must be 0 or more")
    return args


def main(argv=None, now=None, stdin=None, stdout=None, stderr=None):
    args = parse_args(argv)
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    now = now or datetime.datetime.now(datetime.timezone.utc)
    try:
        if args.input == "-":
            text = (stdin or sys.stdin).read()
        else:
            with open(args.input, encoding="utf-8") as handle:
                text = handle.read()
        run = load_run(text)
    except (OSError, ValueError) as exc:
        stderr.write("drift_report: cannot read %s: %s\n" % (args.input, exc))
        return 2
    report = build_report(run, now, args.diff_lines, None if args.input == "-" else os.path.abspath(args.input))
    if args.json:
        write_atomic(args.json, render_json(report))
    if args.prom:
        write_atomic(args.prom, render_prom(report))
    if args.report_dir:
        path, removed = save_to_dir(report, args.report_dir, args.keep, now)
        if not args.quiet:
            stderr.write("drift_report: wrote %s, pruned %d old report(s)\n" % (path, len(removed)))
    if not args.quiet:
        stdout.write(render_text(report))
    return report["exit_code"]
