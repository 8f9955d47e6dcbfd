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

Drift items and their category
------------------------------
One item per changed result (per changed loop item for loops), per probe finding, per counted failure and per
unreachable host: the task name as Ansible prints it ("sglang_server : Write the unit"), a category, a summary
(the result's ``msg``, the sites a patch would touch, a smoke check's mismatches) and a unified diff rendered from
the result's ``diff`` (a list or a mapping of ``before``/``after`` strings or mappings, with optional
``before_header``/``after_header``, or ``prepared`` text), cut to ``--diff-lines`` lines.

Categories are explicit, never read from task names (a renamed task reports the same):

* a probe finding carries its own ``category`` (one of CATEGORIES; anything else counts as ``other``);
* a change is categorised by the files its result names (PATH_TABLE, when every file maps to one category:
  ``nccl.env`` and the NCCL start-up hook nccl, other ``*.env`` environment, ``*.service`` unit, a lock copy
  packages), else by a lock
  smoke report in its output (packages), else by the task file that produced it: PRODUCERS maps
  ``roles/<role>/tasks/<file>`` (read from the task's ``path`` in the callback output) to a category.
Drift probes (the convention roles/sglang_drift follows)
-------------------------------------------------------
A probe is an ``ansible.builtin.set_fact`` of a fact named ``sglang_drift_finding`` (roles/sglang_drift) or
``drift`` (a playbook's own probe), read from ``ansible_facts`` (a top-level key in the result is read too); its
result, never ``changed`` or ``failed``, says what it found. The value is a mapping, or a list of mappings, with these keys:

    item       what was compared (a path, a unit, a URL); default: the task name without its role prefix
    expected   the deployed / intended value (any JSON value)
    actual     what the host has now (any JSON value)
    category   one of CATEGORIES (required; a missing or unknown one counts as ``other``)
    drifted    optional bool; when absent, drift means expected != actual (compared as JSON values)
    detail     optional text shown under the item
    secondary  optional bool: a consequence of other drift (for example "the next deploy restarts the
               server"); counted only when the host has no other drift item, otherwise listed, uncounted
    note       optional text for a clean check (for example "no record yet"), kept in the report's checks

A null, empty mapping or empty list means "nothing to compare" (clean, not recorded).

    - name: "Drift probe: GPU driver is the one the last deploy ran on"
      ansible.builtin.set_fact:
        sglang_drift_finding:
          item: /var/lib/sglang/deployed-driver
          expected: "{{ recorded }}"
          actual: "{{ nvidia_gpu.driver_version }}"
          category: driver

Every probe finding, clean or not, is kept in the report's ``checks`` for the host. A probe task that itself
failed (and was not rescued) is an error like any other failed task. A check that can only fail (an assert
of a role) becomes a probe with block/rescue: the rescue sets its finding (``drifted: true``) from
``ansible_failed_result``; the recap then counts the failure as rescued, not as an error
(roles/sglang_drift/tasks/role_failed.yml does this for the deploy roles' known drift signals).

Outputs
-------
stdout: one line per host (status and counts, or the first error), then each item with its summary and diff.
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
import difflib
import json
import math
import os
import re
import sys

from ansible.module_utils import atomic_files

STATUS_VALUES = {"clean": 0, "drift": 1, "error": 2, "unreachable": 3}
EXIT_CODES = {"clean": 0, "drift": 1, "error": 2, "unreachable": 2}
CATEGORIES = ("patch", "packages", "nccl", "environment", "unit", "service", "venv", "driver", "model", "other")
DEFAULT_DIFF_LINES = 20
DEFAULT_KEEP = 30

# What a deploy role's task file changes, by roles/<role>/tasks/<file> ("*": the role's other files). The task
# file is where a change is produced: renaming a task keeps its category, moving it to another file is a decision
# (tests/unit/test_drift_categories.py keeps every entry pointing at a real file).
PRODUCERS = {
    ("gpu_preflight", "*"): "other",
    ("sglang_model", "*"): "model",
    ("sglang_install", "account.yml"): "other",
    ("sglang_install", "environment.yml"): "environment",
    ("sglang_install", "lock_check.yml"): "packages",
    ("sglang_install", "*"): "venv",
    ("fusion_patch", "*"): "patch",
    ("sglang_allreduce", "*"): "environment",
    ("nccl_tuning", "*"): "nccl",
    ("sglang_server", "api_key.yml"): "environment",
    ("sglang_server", "unit.yml"): "unit",
    ("sglang_server", "*"): "service",
}
# The first rule a path matches decides its category: nccl_tuning's environment file is NCCL drift like its hook
# (docs/drift.md), before every other *.env file.
PATH_TABLE = (
    (r"(?:^|/)nccl\.env$", "nccl"),
    (r"\.env$", "environment"),
    (r"\.service$", "unit"),
    (r"sglang_nccl_env\.(py|pth)$", "nccl"),
    (r"/locks/[^/]+\.txt$", "packages"),
)
_PATH_RULES = [(re.compile(pattern), category) for pattern, category in PATH_TABLE]
_TASK_FILE = re.compile(r"(?:^|/)roles/([^/]+)/tasks/([^/:]+?)(?::\d+)?$")
_ROLE_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+ : ")
# The fact a probe sets: sglang_drift_finding in roles/sglang_drift (its prefix), drift in a playbook's own probes.
FINDING_FACTS = ("sglang_drift_finding", "drift")
_PROBE_PREFIX = re.compile(r"^drift probe:\s*", re.IGNORECASE)
REPORT_NAME = re.compile(r"^drift-\d{8}T\d{6}Z(?:-\d+)?\.json$")
_HEADER_SUFFIX = re.compile(r" \((before|after)\)$")
_SITE_STATUSES = ("would_patch", "patch", "would_restore", "restore", "patched")


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
# Categories, diffs, summaries


def producer(task_path):
    """(role, task file) of a task path such as .../roles/sglang_server/tasks/unit.yml:12, or None."""
    match = _TASK_FILE.search(task_path or "")
    return (match.group(1), match.group(2)) if match else None


def category_for_task(task_path):
    """The PRODUCERS category of the task file at TASK_PATH ('other' outside the deploy roles)."""
    found = producer(task_path)
    if not found:
        return "other"
    role, name = found
    return PRODUCERS.get((role, name), PRODUCERS.get((role, "*"), "other"))


def known_category(category):
    return category if category in CATEGORIES else "other"


def category_for_paths(paths):
    """The PATH_TABLE category shared by every path, or None."""
    found = set()
    for path in paths:
        for pattern, category in _PATH_RULES:
            if pattern.search(path):
                found.add(category)
                break
        else:
            return None
    return found.pop() if len(found) == 1 else None


def _mapping(value):
    """VALUE when it is a mapping, else an empty one: a result's content is a module's, of any shape."""
    return value if isinstance(value, dict) else {}


def _items(value):
    """VALUE when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def _entries(diff):
    if not diff:
        return []
    return [entry for entry in (diff if isinstance(diff, list) else [diff]) if entry]


def diff_paths(diff):
    """File paths a result's diff names (headers without ' (before)'/' (after)', or a mapping's 'path')."""
    paths = []
    for entry in _entries(diff):
        if not isinstance(entry, dict):
            continue
        for key in ("before_header", "after_header"):
            header = entry.get(key)
            if isinstance(header, str) and header.strip():
                paths.append(_HEADER_SUFFIX.sub("", header.strip()))
        for key in ("before", "after"):
            side = entry.get(key)
            if isinstance(side, dict) and isinstance(side.get("path"), str):
                paths.append(side["path"])
    unique = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


def _scalar(value):
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _as_text(value):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "".join("%s: %s\n" % (key, _scalar(value[key])) for key in sorted(value, key=str))
    if isinstance(value, list):
        return "".join("%s\n" % _scalar(item) for item in value)
    return "%s\n" % _scalar(value)


def _header(entry, side, target=None):
    if target:
        return "%s (%s)" % (target, side)
    header = entry.get(side + "_header")
    if isinstance(header, str) and header.strip():
        return header.strip()
    value = entry.get(side)
    if isinstance(value, dict) and isinstance(value.get("path"), str):
        return value["path"] + " (" + side + ")"
    other = entry.get(("after" if side == "before" else "before") + "_header")
    return other.strip() if isinstance(other, str) and other.strip() else side


def result_target(result):
    """The one file a single-file result is about: its dest or path (from the result or its module arguments)."""
    args = _mapping(_mapping(result.get("invocation")).get("module_args"))
    for source in (result, args):
        for key in ("dest", "path"):
            value = source.get(key)
            if isinstance(value, str) and value.startswith("/"):
                return value
    return None


def render_diff(diff, max_lines=DEFAULT_DIFF_LINES, context=3, target=None):
    """(lines, omitted): a unified diff of every before/after pair in DIFF, cut to MAX_LINES (0: no limit).

    TARGET (the file of a single-file result) names both sides; a template's after_header is otherwise its
    temporary source on the controller."""
    lines = []
    for entry in _entries(diff):
        if isinstance(entry, str):
            lines.extend(entry.splitlines())
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("prepared"):
            lines.extend(str(entry["prepared"]).splitlines())
            continue
        if "before" not in entry and "after" not in entry:
            continue
        before, after = _as_text(entry.get("before")), _as_text(entry.get("after"))
        if before == after:
            continue
        lines.extend(difflib.unified_diff(before.splitlines(), after.splitlines(), _header(entry, "before", target),
                                          _header(entry, "after", target), n=context, lineterm=""))
    if max_lines and len(lines) > max_lines:
        return lines[:max_lines], len(lines) - max_lines
    return lines, 0


def _shorten(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _smoke_summary(stdout):
    """A lock smoke check's JSON (sglang_install's lock_smoke.py): what does not match."""
    try:
        report = json.loads(stdout)
    except (TypeError, ValueError):
        return None
    if not isinstance(report, dict) or not ("mismatched" in report or "missing" in report):
        return None
    parts = list(report.get("mismatched") or []) + ["missing %s" % name for name in report.get("missing") or []]
    return "; ".join(parts) or "every pin matches"


def summarize(result):
    """One line on what a result says: msg, a patch's sites, a smoke check's mismatches, or stderr/stdout."""
    if result.get("censored"):
        return str(result["censored"])
    parts = []
    msg = result.get("msg")
    if isinstance(msg, list):
        msg = " ".join(str(part) for part in msg)
    smoke = _smoke_summary(result.get("stdout"))
    # A smoke check's report says more than the exit status it caused.
    if msg and msg not in ("All items completed", "One or more items failed") \
            and not (smoke and msg == "non-zero return code"):
        parts.append(str(msg))
    sites = [site for site in _items(result.get("sites")) if isinstance(site, dict)
             and site.get("status") in _SITE_STATUSES]
    if sites:
        parts.append("sites: " + ", ".join(
            "%s %s:%s" % (site.get("gate", "?"), site.get("file", "?"), site.get("line", "?")) for site in sites))
    if smoke:
        parts.append(smoke)
    if not parts or msg in ("non-zero return code",):
        for key in ("stderr", "stdout"):
            text = result.get(key)
            if isinstance(text, str) and text.strip() and not (key == "stdout" and smoke):
                parts.append(text.strip().splitlines()[-1])
                break
    if not parts:
        for sub in _items(result.get("results")):
            if isinstance(sub, dict) and (sub.get("failed") or sub.get("changed")) and sub.get("msg"):
                parts.append(str(sub["msg"]))
    return _shorten("; ".join(parts)) if parts else ""


def _label(sub):
    label = sub.get("_ansible_item_label", sub.get("item"))
    if isinstance(label, dict):
        label = label.get("path", label.get("name", json.dumps(label, sort_keys=True)))
    return _shorten(label if isinstance(label, str) else json.dumps(label, sort_keys=True), 80)


# ---------------------------------------------------------------------------------------------------------------
# Items


def probe_label(task_name):
    """The default item of a probe: its task name without the role prefix (and a leading "Drift probe:")."""
    return _PROBE_PREFIX.sub("", _ROLE_PREFIX.sub("", task_name or "")).strip()


def finding_of(result):
    """The finding a probe's result carries (FINDING_FACTS), or None."""
    facts = _mapping(result.get("ansible_facts"))
    for name in FINDING_FACTS:
        if name in facts:
            return facts[name]
        if name in result:
            return result[name]
    return None


def is_probe(result):
    """Whether RESULT is a drift probe's: a set_fact of a finding (in a loop: any item's)."""
    if isinstance(result.get("results"), list):
        return any(isinstance(sub, dict) and is_probe(sub) for sub in result["results"])
    facts = _mapping(result.get("ansible_facts"))
    return any(name in facts or name in result for name in FINDING_FACTS)


def _to_bool(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def probe_findings(task_name, result):
    """[finding] from one probe result (see the module docstring); each has drifted set."""
    label = probe_label(task_name)
    if result.get("skipped") or result.get("failed") or result.get("unreachable"):
        return []
    if isinstance(result.get("results"), list):  # a probe in a loop
        findings = []
        for sub in result["results"]:
            if isinstance(sub, dict):
                findings.extend(probe_findings(task_name, sub))
        return findings
    raw = finding_of(result)
    records = raw if isinstance(raw, list) else [raw]
    findings = []
    for record in records:
        if record in (None, {}, [], ""):
            continue
        if not isinstance(record, dict):
            record = {"actual": record, "drifted": _to_bool(record)}
        finding = {"item": record.get("item") or label, "expected": record.get("expected"),
                   "actual": record.get("actual")}
        if "drifted" in record:
            finding["drifted"] = _to_bool(record["drifted"])
        else:
            finding["drifted"] = (json.dumps(record.get("expected"), sort_keys=True)
                                  != json.dumps(record.get("actual"), sort_keys=True))
        finding["category"] = known_category(record.get("category"))
        for key in ("detail", "note"):
            if record.get(key):
                finding[key] = str(record[key])
        finding["secondary"] = _to_bool(record.get("secondary", False))
        findings.append(finding)
    return findings


def _change_item(host, task_name, task_path, result, max_lines):
    diff = result.get("diff")
    target = result_target(result)
    paths = [target] if target else diff_paths(diff)
    lines, omitted = render_diff(diff, max_lines, target=target)
    category = (category_for_paths(paths) or ("packages" if _smoke_summary(result.get("stdout")) else None)
                or category_for_task(task_path))
    summary = summarize(result)
    if not summary:
        args = _mapping(_mapping(result.get("invocation")).get("module_args"))
        what = ", ".join(paths) or (args.get("name") if isinstance(args.get("name"), str) else "")
        summary = "would change " + what if what else "would change"
    return {"host": host, "task": task_name, "kind": "change", "category": category, "summary": summary,
            "paths": paths, "diff": lines, "diff_omitted": omitted, "counted": True}


def change_items(host, task_name, result, max_lines=DEFAULT_DIFF_LINES, task_path=""):
    """Items for a result that would change something (per changed loop item for loops)."""
    if not result.get("changed") or result.get("failed") or result.get("skipped") or result.get("unreachable"):
        return []
    subs = [sub for sub in _items(result.get("results")) if isinstance(sub, dict)]
    if subs:
        items = [_change_item(host, "%s (%s)" % (task_name, _label(sub)), task_path, sub, max_lines)
                 for sub in subs if sub.get("changed") and not sub.get("skipped") and not sub.get("failed")]
        if items:
            return items
    return [_change_item(host, task_name, task_path, result, max_lines)]


def _probe_item(host, task_name, finding, max_lines=DEFAULT_DIFF_LINES):
    lines, omitted = [], 0
    if isinstance(finding["expected"], dict) and isinstance(finding["actual"], dict):
        lines, omitted = render_diff({"before": finding["expected"], "after": finding["actual"],
                                      "before_header": "expected", "after_header": "actual"}, max_lines)
    summary = "%s: expected %s, actual %s" % (finding["item"], _shorten(_scalar(finding["expected"]), 200),
                                              _shorten(_scalar(finding["actual"]), 200))
    if finding.get("detail"):
        summary += " (%s)" % _shorten(finding["detail"], 200)
    return {"host": host, "task": task_name, "kind": "probe",
            "category": known_category(finding.get("category")), "summary": summary,
            "item": finding["item"], "expected": finding["expected"], "actual": finding["actual"],
            "diff": lines, "diff_omitted": omitted, "secondary": finding.get("secondary", False), "counted": True}


def _failure_item(host, task_name, task_path, result, kind):
    return {"host": host, "task": task_name, "kind": kind, "category": category_for_task(task_path),
            "summary": summarize(result) or ("unreachable" if kind == "unreachable" else "failed"),
            "diff": [], "diff_omitted": 0, "counted": False}


def _bare_error(host, summary):
    return {"host": host, "task": "", "kind": "error", "category": "other", "summary": summary,
            "diff": [], "diff_omitted": 0, "counted": False}


def analyse(run, max_diff_lines=DEFAULT_DIFF_LINES):
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
                unreachable.append(_failure_item(host, task_name, task_path, result, "unreachable"))
                continue
            if result.get("failed"):
                failed.append(_failure_item(host, task_name, task_path, result, "error"))
                continue
            if is_probe(result):
                for finding in probe_findings(task_name, result):
                    checks.append(dict(finding, task=task_name))
                    if finding["drifted"]:
                        items.append(_probe_item(host, task_name, finding, max_diff_lines))
                continue
            items.extend(change_items(host, task_name, result, max_diff_lines, task_path))

        primary = [item for item in items if not item.get("secondary")]
        for item in items:
            item["counted"] = not (item.get("secondary") and primary)

        if host_stats is None:
            counted = failed
            counted_failures = failed or [_bare_error(host, "no recap for this host: the run was cut short")]
        else:
            n_failures = int(host_stats.get("failures") or 0)
            counted = failed[len(failed) - n_failures:] if 0 < n_failures <= len(failed) else failed[:n_failures]
            counted_failures = list(counted)
            if n_failures > len(failed):
                counted_failures.append(_bare_error(
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


def build_report(run, now, max_diff_lines=DEFAULT_DIFF_LINES, source=None):
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
        lines.append(("%-*s  %-11s  %s" % (width, host, info["status"], _shorten(_host_detail(info), 160))).rstrip())
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
    tally = {}
    for info in hosts.values():
        tally[info["status"]] = tally.get(info["status"], 0) + 1
    lines.append("")
    lines.append("%s: %s (exit %d)" % (report["status"], ", ".join(
        "%d %s" % (tally[status], status) for status in STATUS_VALUES if status in tally) or "no hosts",
        report["exit_code"]))
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--diff-lines", type=int, default=DEFAULT_DIFF_LINES, metavar="N",
                        help="diff lines per item (default %d, 0: all)" % DEFAULT_DIFF_LINES)
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
