# -*- coding: utf-8 -*-
"""Drift items: what each result of a check-mode run says, as items of the drift report
(module_utils/drift_report.py reads the run and decides each host's status from these).

Drift items
-----------
One item per changed result (per changed loop item for loops), per probe finding, per counted failure and per
unreachable host: the task name as Ansible prints it ("sglang_server : Write the unit"), a category, a summary
(the result's ``msg``, the sites a patch would touch, a smoke check's mismatches) and a unified diff rendered from
the result's ``diff`` (a list or a mapping of ``before``/``after`` strings or mappings, with optional
``before_header``/``after_header``, or ``prepared`` text), cut to ``--diff-lines`` lines.

Each item's category comes from module_utils/drift_categories.py, or from the finding of a probe.

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
"""
from __future__ import annotations

import difflib
import json
import re

from ansible.module_utils import drift_categories as dc

DEFAULT_DIFF_LINES = 20
_ROLE_PREFIX = re.compile(r"^[A-Za-z0-9_.-]+ : ")
# The fact a probe sets: sglang_drift_finding in roles/sglang_drift (its prefix), drift in a playbook's own probes.
FINDING_FACTS = ("sglang_drift_finding", "drift")
_PROBE_PREFIX = re.compile(r"^drift probe:\s*", re.IGNORECASE)
_HEADER_SUFFIX = re.compile(r" \((before|after)\)$")
_SITE_STATUSES = ("would_patch", "patch", "would_restore", "restore", "patched")


# ---------------------------------------------------------------------------------------------------------------
# Diffs and summaries


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


def shorten(text, limit=300):
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
    return shorten("; ".join(parts)) if parts else ""


def _label(sub):
    label = sub.get("_ansible_item_label", sub.get("item"))
    if isinstance(label, dict):
        label = label.get("path", label.get("name", json.dumps(label, sort_keys=True)))
    return shorten(label if isinstance(label, str) else json.dumps(label, sort_keys=True), 80)


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
        finding["category"] = dc.known_category(record.get("category"))
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
    category = (dc.category_for_paths(paths) or ("packages" if _smoke_summary(result.get("stdout")) else None)
                or dc.category_for_task(task_path))
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


def probe_item(host, task_name, finding, max_lines=DEFAULT_DIFF_LINES):
    lines, omitted = [], 0
    if isinstance(finding["expected"], dict) and isinstance(finding["actual"], dict):
        lines, omitted = render_diff({"before": finding["expected"], "after": finding["actual"],
                                      "before_header": "expected", "after_header": "actual"}, max_lines)
    summary = "%s: expected %s, actual %s" % (finding["item"], shorten(_scalar(finding["expected"]), 200),
                                              shorten(_scalar(finding["actual"]), 200))
    if finding.get("detail"):
        summary += " (%s)" % shorten(finding["detail"], 200)
    return {"host": host, "task": task_name, "kind": "probe",
            "category": dc.known_category(finding.get("category")), "summary": summary,
            "item": finding["item"], "expected": finding["expected"], "actual": finding["actual"],
            "diff": lines, "diff_omitted": omitted, "secondary": finding.get("secondary", False), "counted": True}


def failure_item(host, task_name, task_path, result, kind):
    return {"host": host, "task": task_name, "kind": kind, "category": dc.category_for_task(task_path),
            "summary": summarize(result) or ("unreachable" if kind == "unreachable" else "failed"),
            "diff": [], "diff_omitted": 0, "counted": False}


def bare_error(host, summary):
    return {"host": host, "task": "", "kind": "error", "category": "other", "summary": summary,
            "diff": [], "diff_omitted": 0, "counted": False}
