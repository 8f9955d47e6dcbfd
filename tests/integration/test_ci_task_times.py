"""scripts/ci_callbacks/ci_task_times.py, enabled as scripts/test-all.sh enables it: a real ansible-playbook run on
localhost records each task (role, handler, play, order) to a JSON file, a run that one of its tasks starts records
its parent step, and the stdout callback's output is left as it was."""
import glob
import json
import os

from tests.helpers.ansible_run import REPO, run_playbook
from tests.helpers.script_module import load_file

CALLBACKS = os.path.join(REPO, "scripts", "ci_callbacks")
times = load_file("scripts/ci_callbacks/ci_task_times.py", "ci_task_times")

PLAYBOOK = """
- name: Outer play
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  roles:
    - tiny
  tasks:
    - name: Run the inner playbook
      ansible.builtin.command:
        argv: ["{{ ansible_playbook_python | dirname }}/ansible-playbook", "-i", "localhost,", "inner.yml"]
        chdir: "{{ playbook_dir }}"
      changed_when: true
      notify: Say it ran
  handlers:
    - name: Say it ran
      ansible.builtin.debug:
        msg: ran
"""

INNER = """
- name: Inner play
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Inner task
      ansible.builtin.debug:
        msg: inner
"""

ROLE_TASKS = """
- name: Role task
  ansible.builtin.set_fact:
    tiny_done: true
"""


def enabled(folder, label):
    return {"ANSIBLE_CALLBACK_PLUGINS": CALLBACKS, "ANSIBLE_CALLBACKS_ENABLED": "ci_task_times",
            "CI_TASK_TIMES_DIR": str(folder), "CI_TASK_TIMES_LABEL": label,
            times.PARENT_ENV: ""}  # not this test's parent, were pytest itself run under the callback


def test_each_task_recorded_with_its_role_play_handler_and_parent(tmp_path):
    project = tmp_path / "project"
    (project / "roles" / "tiny" / "tasks").mkdir(parents=True)
    (project / "roles" / "tiny" / "tasks" / "main.yml").write_text(ROLE_TASKS)
    (project / "outer.yml").write_text(PLAYBOOK)
    (project / "inner.yml").write_text(INNER)
    folder = tmp_path / "times"
    rc, report = run_playbook(str(project / "outer.yml"), env=enabled(folder, "molecule-test"), inventory="localhost,")
    assert rc == 0, report
    # The stdout callback (ansible.posix.json) still prints its whole report.
    assert [t["task"]["name"] for t in report["plays"][0]["tasks"]] == [
        "tiny : Role task", "Run the inner playbook", "Say it ran"]

    runs = {}
    for path in glob.glob(str(folder / "*.json")):
        with open(path, encoding="utf-8") as handle:
            run = json.load(handle)
        runs[run["step"]] = run
    assert sorted(runs) == ["inner", "outer"]
    assert not glob.glob(str(folder / ".tmp-*"))

    outer = runs["outer"]
    assert (outer["label"], outer["parent"], outer["playbook"]) == ("molecule-test", "", str(project / "outer.yml"))
    assert [(t["name"], t["role"], t["play"], t["handler"]) for t in outer["tasks"]] == [
        ("Role task", "tiny", "Outer play", False),
        ("Run the inner playbook", "", "Outer play", False),
        ("Say it ran", "", "Outer play", True),
    ]
    assert outer["tasks"][0]["path"] == "%s:2" % (project / "roles" / "tiny" / "tasks" / "main.yml")
    # Timed one after the other: each starts where the one before ended, all within the run.
    tasks = outer["tasks"]
    for before, after in zip(tasks, tasks[1:]):
        assert after["start"] >= before["start"] + before["duration"] - 0.01
    assert all(t["duration"] >= 0 for t in tasks)
    assert sum(t["duration"] for t in tasks) <= outer["duration"]

    inner = runs["inner"]
    assert (inner["label"], inner["parent"]) == ("molecule-test", "outer")
    assert [(t["name"], t["play"]) for t in inner["tasks"]] == [("Inner task", "Inner play")]
    # The inner run is inside the outer task that started it.
    assert inner["duration"] <= tasks[1]["duration"]


def test_nothing_recorded_without_a_folder(tmp_path):
    (tmp_path / "inner.yml").write_text(INNER)
    env = enabled(tmp_path / "times", "x")
    env["CI_TASK_TIMES_DIR"] = ""
    rc, report = run_playbook(str(tmp_path / "inner.yml"), env=env, inventory="localhost,")
    assert rc == 0
    assert report["stats"]["localhost"]["ok"] == 1
    assert os.listdir(str(tmp_path)) == ["inner.yml"]


def test_molecule_idempotence_is_named_as_its_step():
    assert times.step_name("/x/molecule/default/converge.yml", ["converge.yml"]) == "converge"
    assert times.step_name("/x/molecule/default/converge.yml",
                           ["--skip-tags", "molecule-notest,notest,molecule-idempotence-notest"]) == "idempotence"
    assert times.step_name("", []) == "?"
