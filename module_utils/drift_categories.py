# -*- coding: utf-8 -*-
"""Drift categories: the category a drift item is filed under (module_utils/drift_report.py assembles the
report, module_utils/drift_items.py makes its items).

Categories are explicit, never read from task names (a renamed task reports the same):

* a probe finding carries its own ``category`` (one of CATEGORIES; anything else counts as ``other``);
* a change is categorised by the files its result names (PATH_TABLE, when every file maps to one category:
  ``nccl.env`` and the NCCL start-up hook nccl, other ``*.env`` environment, ``*.service`` unit, a lock copy
  packages), else by a lock smoke report in its output (packages; drift_items reads it), else by the task file
  that produced it: PRODUCERS maps ``roles/<role>/tasks/<file>`` (read from the task's ``path`` in the callback
  output) to a category.

docs/drift.md's category table is CATEGORIES, in this order (tests/unit/test_drift_docs.py).
"""
from __future__ import annotations

import re

CATEGORIES = ("patch", "packages", "nccl", "environment", "unit", "service", "venv", "driver", "model", "other")

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
