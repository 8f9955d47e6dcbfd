#!/usr/bin/env python3
"""The end of CI's log (scripts/test-all.sh): where the time went, the stage totals, the total against the budget.

    python3 scripts/ci-summary.py --total SECONDS [--logs reports/ci]

Reads what the lanes recorded in the logs folder:
  pytest-junit.xml   pytest's --junitxml with junit_duration_report=total: each test's setup + call + teardown
  task-times/*.json  one file per ansible-playbook run of the molecule lanes and the per-role tests
                     (scripts/ci_callbacks/ci_task_times.py): each task's wall time, across its hosts
  stages.txt         the stage lines of scripts/ci-stage.sh and scripts/ci-molecule-steps.py
  cpu.txt            the whole machine's CPU counters over the run (scripts/ci_cpu_usage.py)
and prints the slowest twenty items of both kinds together, the stage lines, and the total against the budget
(30 minutes on an unloaded machine) as a figure: the clock never fails CI, the load average says how to read it.
A file that is missing or unreadable is named and left out; the summary itself never fails the run.
"""
import argparse
import glob
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # scripts/, where loaded by path too (the tests)
import ci_cpu_usage  # noqa: E402  pylint: disable=wrong-import-position

SLOWEST = 20
BUDGET_MIN = 30


class Item(object):
    """One timed thing: a pytest test or an Ansible task."""

    def __init__(self, seconds, lane, where, name):
        self.seconds, self.lane, self.where, self.name = seconds, lane, where, name

    def key(self):
        return (-self.seconds, self.lane, self.where, self.name)


def test_location(classname, name):
    """("tests/unit/test_x.py", "TestY::test_z[p]") from junit's classname "tests.unit.test_x.TestY" and name."""
    parts = classname.split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_") or part.endswith("_test") or part == "conftest":
            return "/".join(parts[:index + 1]) + ".py", "::".join(parts[index + 1:] + [name])
    return classname, name


def pytest_items(path):
    """(items, note): each test case of a junit XML file; note says why there are none."""
    if not os.path.exists(path):
        return [], "no %s (pytest did not finish)" % os.path.basename(path)
    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, OSError) as error:
        return [], "%s unreadable: %s" % (os.path.basename(path), error)
    items = []
    for case in root.iter("testcase"):
        try:
            seconds = float(case.get("time", "0"))
        except ValueError:
            continue
        where, name = test_location(case.get("classname", ""), case.get("name", ""))
        items.append(Item(seconds, "pytest", where, name))
    return items, ""


def task_items(folder):
    """(items, notes): each task of each run recorded in folder (*.json of ci_task_times)."""
    items, notes = [], []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path, encoding="utf-8") as handle:
                run = json.load(handle)
            lane = run.get("label") or "ansible"
            where = "/".join(filter(None, [run.get("parent", ""), run.get("step", "")]))
            for task in run["tasks"]:
                name = "%s : %s" % (task["role"], task["name"]) if task.get("role") else task["name"]
                if task.get("handler"):
                    name = "handler " + name
                items.append(Item(float(task["duration"]), lane, where, name))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            notes.append("%s unreadable: %s" % (os.path.basename(path), error))
    return items, notes


def slowest(items, count=SLOWEST):
    return sorted(items, key=Item.key)[:count]


def format_items(items, tests, tasks):
    lines = ["== ci: slowest %d of %d pytest tests and %d Ansible tasks (wall s, lane, step or file, item;"
             " a/b is playbook b run by a task of step a, its time inside that task's too):"
             % (len(items), tests, tasks)]
    # Columns as wide as their longest entry (a test file's path, a nested step), up to a limit.
    lane = min(max([len(item.lane) for item in items] or [0]), 24)
    where = min(max([len(item.where) for item in items] or [0]), 64)
    for item in items:
        lines.append("   %7.1f  %-*s  %-*s  %s" % (item.seconds, lane, item.lane[:lane], where, item.where[:where],
                                                  item.name[:140]))
    return lines


def format_stages(path):
    try:
        with open(path, encoding="utf-8") as handle:
            stages = [line.rstrip("\n").replace("== ci: stage ", "   ", 1) for line in handle if line.strip()]
    except OSError:
        stages = ["   (no %s)" % path]
    return ["== ci: stages (wall, cpu):"] + stages


def format_budget(total, budget_min=BUDGET_MIN, load=None, cores=None):
    """The total against the budget, as a figure: how far over or under, and the load it was measured under."""
    budget = budget_min * 60
    if total <= budget:
        verdict = "within it, %.1f min to spare" % ((budget - total) / 60.0)
    else:
        verdict = "over it by %.1f min" % ((total - budget) / 60.0)
    line = "== ci: total %d s (%.1f min) against a budget of %d min unloaded: %.0f%%, %s" % (
        total, total / 60.0, budget_min, 100.0 * total / budget, verdict)
    if load is not None:
        line += "; load average at the end %.2f %.2f %.2f on %s cores" % (load[0], load[1], load[2], cores or "?")
    return line


def summary(logs, total, budget_min=BUDGET_MIN, load=None, cores=None):
    tests, note = pytest_items(os.path.join(logs, "pytest-junit.xml"))
    tasks, notes = task_items(os.path.join(logs, "task-times"))
    if not tasks:
        notes.append("no Ansible task times in %s" % os.path.join(logs, "task-times"))
    lines = ["== ci: (%s)" % text for text in [note] + notes if text]
    lines += format_items(slowest(tests + tasks), len(tests), len(tasks))
    lines += format_stages(os.path.join(logs, "stages.txt"))
    lines.append(ci_cpu_usage.summary(os.path.join(logs, "cpu.txt"), cores))
    if total is not None:
        lines.append(format_budget(total, budget_min, load, cores))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--logs", default=os.environ.get("CI_LOGS", "reports/ci"))
    parser.add_argument("--total", type=int, help="the run's wall seconds so far")
    parser.add_argument("--budget-min", type=int, default=BUDGET_MIN)
    args = parser.parse_args(argv)
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    sys.stdout.write("\n".join(summary(args.logs, args.total, args.budget_min, load, os.cpu_count())) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
