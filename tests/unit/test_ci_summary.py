"""scripts/ci-summary.py: the slowest twenty of pytest's tests and Ansible's tasks together, the stage lines, and
the total against the budget as a figure."""
import json

from tests.helpers.script_module import load_file

summary = load_file("scripts/ci-summary.py", "ci_summary")

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.unit.test_a" name="test_fast" time="0.004"/>
<testcase classname="tests.integration.test_b.TestServer" name="test_starts[8x]" time="41.250">
  <skipped message="not here"/></testcase>
<testcase classname="tests.integration.test_c" name="test_wheels" time="7.5"/>
<testcase classname="tests.unit.test_a" name="test_odd" time="not a number"/>
</testsuite></testsuites>
"""


def write_run(folder, name, label, step, tasks, parent=""):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(json.dumps({
        "label": label, "parent": parent, "step": step, "playbook": step + ".yml", "argv": [],
        "started": 0, "duration": sum(t[1] for t in tasks),
        "tasks": [{"name": n, "duration": d, "role": r, "play": "p", "path": "x.yml:1", "handler": h, "start": 0}
                  for n, d, r, h in tasks]}))


def make_logs(tmp_path, tasks_count=0):
    (tmp_path / "pytest-junit.xml").write_text(JUNIT)
    times = tmp_path / "task-times"
    write_run(times, "a.json", "molecule-default", "verify",
              [("Run the gate", 300.0, "", False), ("Gathering Facts", 2.0, "", False)])
    write_run(times, "b.json", "molecule-default", "deploy",
              [("Install the venv", 120.5, "sglang_install", False)], parent="verify")
    write_run(times, "c.json", "roles", "tests_gpu_preflight",
              [("Restart the server", 7.5, "sglang_server", True)])
    # Many short tasks: only twenty items are printed, the slowest.
    write_run(times, "d.json", "molecule-drift", "converge",
              [("step %02d" % i, 3.0 + i / 100.0, "", False) for i in range(tasks_count)])
    (tmp_path / "stages.txt").write_text("== ci: stage setup 3 s (cpu 2 s)\n"
                                         "== ci: stage molecule-default/verify 1210 s\n"
                                         "== ci: stage pytest 900 s (cpu 1500 s) FAILED (exit 1)\n")
    # scripts/ci_cpu_usage.py's record: 600 s, three quarters of the machine busy.
    (tmp_path / "cpu.txt").write_text("0.0 0 0 0 0 0 0 0 0\n600.0 900 0 0 300 0 0 0 0\n")
    return tmp_path


def item_rows(lines):
    """The listed items as (seconds, lane, where, name), from the printed table."""
    start = next(i for i, line in enumerate(lines) if line.startswith("== ci: slowest "))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("== ci:"):
            break
        seconds, lane, where, name = line.split(None, 3)
        rows.append((float(seconds), lane, where, name))
    return rows


def test_the_slowest_twenty_of_tests_and_tasks_in_order(tmp_path):
    lines = summary.summary(str(make_logs(tmp_path, tasks_count=30)), None)
    rows = item_rows(lines)
    assert len(rows) == 20
    assert rows[:5] == [
        (300.0, "molecule-default", "verify", "Run the gate"),
        (120.5, "molecule-default", "verify/deploy", "sglang_install : Install the venv"),
        (41.2, "pytest", "tests/integration/test_b.py", "TestServer::test_starts[8x]"),
        (7.5, "pytest", "tests/integration/test_c.py", "test_wheels"),
        (7.5, "roles", "tests_gpu_preflight", "handler sglang_server : Restart the server"),
    ]
    # Then the drift steps, slowest first; the 2 s and 4 ms items and the shortest steps are left out.
    assert [row[3] for row in rows[5:]] == ["step %02d" % i for i in range(29, 14, -1)]
    assert [row[0] for row in rows] == sorted((row[0] for row in rows), reverse=True)
    assert lines[next(i for i, line in enumerate(lines) if line.startswith("== ci: slowest "))].startswith(
        "== ci: slowest 20 of 3 pytest tests and 34 Ansible tasks")


def test_stage_lines_follow_and_no_budget_line_without_a_total(tmp_path):
    lines = summary.summary(str(make_logs(tmp_path)), None)
    stages = lines[lines.index("== ci: stages (wall, cpu):") + 1:]
    assert stages[:-1] == ["   setup 3 s (cpu 2 s)", "   molecule-default/verify 1210 s",
                           "   pytest 900 s (cpu 1500 s) FAILED (exit 1)"]
    assert stages[-1].startswith("== ci: the machine's CPU (? cores) over 600 s: 75% busy")


def test_the_budget_is_a_figure_over_or_under(tmp_path):
    logs = str(make_logs(tmp_path))
    over = summary.summary(logs, 2412, load=(1.5, 2.25, 3.0), cores=2)[-1]
    assert over == ("== ci: total 2412 s (40.2 min) against a budget of 30 min unloaded: 134%, over it by 10.2 min;"
                    " load average at the end 1.50 2.25 3.00 on 2 cores")
    under = summary.summary(logs, 1530)[-1]
    assert under == "== ci: total 1530 s (25.5 min) against a budget of 30 min unloaded: 85%, within it, 4.5 min to spare"


def test_missing_and_broken_files_are_named_not_fatal(tmp_path):
    times = tmp_path / "task-times"
    times.mkdir()
    (times / "broken.json").write_text("{\"label\": \"x\", \"tasks\": [{\"name\": 1}]")
    write_run(times, "ok.json", "roles", "tests_nccl_tuning", [("Write the settings", 3.0, "nccl_tuning", False)])
    lines = summary.summary(str(tmp_path), 60)
    assert "== ci: (no pytest-junit.xml (pytest did not finish))" in lines
    assert any(line.startswith("== ci: (broken.json unreadable: ") for line in lines)
    assert item_rows(lines) == [(3.0, "roles", "tests_nccl_tuning", "nccl_tuning : Write the settings")]
    assert "   (no %s)" % (tmp_path / "stages.txt") in lines


def test_main_prints_the_summary(tmp_path, capsys):
    assert summary.main(["--logs", str(make_logs(tmp_path)), "--total", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("== ci: total 100 s (1.7 min) against a budget of 30 min unloaded: 6%")
    assert item_rows(out)[0] == (300.0, "molecule-default", "verify", "Run the gate")
