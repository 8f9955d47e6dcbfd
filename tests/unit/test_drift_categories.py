"""Every drift category the reporter declares can be produced, and every producer it names exists.

Categories are set where findings are made: by the probes and failure signals of roles/sglang_drift (their
`category`), by the files a change names (PATH_TABLE) and by the deploy-role task file a change comes from
(PRODUCERS). A category nothing can produce would be a dashboard series that is always zero; a producer entry
whose task file moved would silently send its changes to another category.
"""
import os
import re

import pytest
import yaml

from ansible.module_utils import drift_categories as dc
from ansible.module_utils import drift_report as dr

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DRIFT_TASKS = os.path.join(ROOT, "roles", "sglang_drift", "tasks")
CATEGORY_LITERAL = re.compile(r"""(?:^\s*category:\s*|'category':\s*')([a-z]+)\b""", re.MULTILINE)


def probe_categories():
    """{category: [task file]} for every category literal in sglang_drift's tasks (probes and signals)."""
    found = {}
    for name in sorted(os.listdir(DRIFT_TASKS)):
        with open(os.path.join(DRIFT_TASKS, name), encoding="utf-8") as handle:
            for category in CATEGORY_LITERAL.findall(handle.read()):
                found.setdefault(category, []).append(name)
    return found


def produced():
    return set(probe_categories()) | set(dc.PRODUCERS.values()) | {category for _p, category in dc.PATH_TABLE}


def test_every_declared_category_can_be_produced():
    assert sorted(set(dc.CATEGORIES) - produced()) == []


def test_nothing_produces_an_undeclared_category():
    assert sorted(produced() - set(dc.CATEGORIES)) == []
    assert sorted(set(probe_categories()) - set(dc.CATEGORIES)) == []


def test_every_probe_declares_a_category():
    """Each finding fact the role sets names its category (a missing one would count as other)."""
    for name in sorted(os.listdir(DRIFT_TASKS)):
        with open(os.path.join(DRIFT_TASKS, name), encoding="utf-8") as handle:
            tasks = yaml.safe_load(handle) or []
        for task in _walk(tasks):
            facts = task.get("ansible.builtin.set_fact") or {}
            if "sglang_drift_finding" in facts:
                value = facts["sglang_drift_finding"]
                text = value if isinstance(value, str) else yaml.safe_dump(value)
                assert "category" in text, (name, task.get("name"))


def _walk(tasks):
    for task in tasks:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key) or [])


@pytest.mark.parametrize("role, task_file", sorted(dc.PRODUCERS))
def test_every_producer_exists(role, task_file):
    tasks = os.path.join(ROOT, "roles", role, "tasks")
    assert os.path.isdir(tasks), role
    if task_file != "*":
        assert os.path.isfile(os.path.join(tasks, task_file)), (role, task_file)


@pytest.mark.parametrize("role, task_file", sorted(dc.PRODUCERS))
def test_a_change_from_each_producer_gets_its_category(role, task_file):
    name = "main.yml" if task_file == "*" else task_file
    run = {"plays": [{"play": {"name": "p"}, "tasks": [{
        "task": {"name": "%s : anything at all" % role, "path": "/x/roles/%s/tasks/%s:7" % (role, name)},
        "hosts": {"h": {"changed": True, "msg": "would change"}}}]}],
        "stats": {"h": {"ok": 1, "changed": 1, "failures": 0, "unreachable": 0}}}
    assert dr.analyse(run)["h"]["counts"] == {dc.PRODUCERS[(role, task_file)]: 1}
