# A CI tool, not part of the collection (scripts/build_collection.py packages only top-level <type>_plugins/).
"""Ansible callback: each task's wall time of one ansible-playbook run, written to a JSON file for CI's summary.

scripts/test-all.sh enables it for the molecule lanes and the per-role tests only, through the environment:
    ANSIBLE_CALLBACK_PLUGINS=<checkout>/scripts/ci_callbacks ANSIBLE_CALLBACKS_ENABLED=ci_task_times
    CI_TASK_TIMES_DIR=<folder for the files> CI_TASK_TIMES_LABEL=<lane, e.g. molecule-default>
A task is timed as ansible.posix.profile_tasks times it: from its start to the next task's start (or the run's
end), across all its hosts. scripts/ci-summary.py reads the files.

An ansible-playbook that a task of this run starts on the controller (a verify step running deploy.yml in check
mode) inherits CI_TASK_TIMES_PARENT, set here to this run's step, and records it as its parent: its tasks' time is
also inside the parent's task that ran it.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: ci_task_times
type: aggregate
short_description: records each task's wall time to a JSON file (CI only)
description:
  - Writes C($CI_TASK_TIMES_DIR/<label>-<playbook>-<pid>-<ns>.json) when the run ends; nothing without
    C(CI_TASK_TIMES_DIR).
requirements:
  - enabled in callbacks_enabled (ANSIBLE_CALLBACKS_ENABLED)
"""

PARENT_ENV = "CI_TASK_TIMES_PARENT"
# molecule adds this tag to --skip-tags for its idempotence step only (a second run of converge.yml).
IDEMPOTENCE_TAG = "molecule-idempotence-notest"


def step_name(playbook, argv):
    """The step a run stands for: the playbook's name without .yml, or "idempotence" for molecule's second converge."""
    if any(IDEMPOTENCE_TAG in arg for arg in argv):
        return "idempotence"
    name = os.path.basename(playbook or "?")
    return name[:-4] if name.endswith(".yml") else name


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ci_task_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._folder = os.environ.get("CI_TASK_TIMES_DIR", "")
        self._label = os.environ.get("CI_TASK_TIMES_LABEL", "") or os.environ.get("MOLECULE_SCENARIO_NAME", "")
        self._parent = os.environ.get(PARENT_ENV, "")
        self._started_wall = time.time()
        self._started = time.monotonic()
        self._playbook = ""
        self._play = ""
        self._current = None
        self._tasks = []

    def _close_task(self):
        if self._current is not None:
            self._current["duration"] = round(time.monotonic() - self._current.pop("_began"), 3)
            self._tasks.append(self._current)
            self._current = None

    def _open_task(self, task, handler=False):
        self._close_task()
        role = getattr(task, "_role", None)
        self._current = {
            "name": task.name or task.action,  # without get_name()'s "role : ": the role is its own field
            "role": role.get_name() if role is not None else "",
            "play": self._play,
            "path": task.get_path() or "",
            "handler": handler,
            "start": round(time.time() - self._started_wall, 3),
            "_began": time.monotonic(),
        }

    def v2_playbook_on_start(self, playbook):
        self._playbook = getattr(playbook, "_file_name", "") or ""
        # Runs this one starts on the controller (through a task's command) inherit it.
        os.environ[PARENT_ENV] = "/".join(filter(None, [self._parent, step_name(self._playbook, sys.argv)]))

    def v2_playbook_on_play_start(self, play):
        self._close_task()
        self._play = play.get_name()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._open_task(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._open_task(task, handler=True)

    def v2_playbook_on_stats(self, stats):
        self._close_task()
        if not self._folder:
            return
        record = {
            "label": self._label,
            "parent": self._parent,
            "step": step_name(self._playbook, sys.argv),
            "playbook": self._playbook,
            "argv": sys.argv[1:],
            "started": round(self._started_wall, 3),
            "duration": round(time.monotonic() - self._started, 3),
            "tasks": self._tasks,
        }
        name = "%s-%s-%d-%d.json" % (self._label or "run", record["step"], os.getpid(), time.time_ns())
        temp = None
        try:
            os.makedirs(self._folder, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self._folder, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(record, out, indent=1)
            os.replace(temp, os.path.join(self._folder, name.replace("/", "_")))
        except OSError as error:
            if temp is not None and os.path.exists(temp):
                os.unlink(temp)
            # Timing is CI's record, never a reason for the run to fail.
            self._display.warning("ci_task_times: not recorded: %s" % error)
