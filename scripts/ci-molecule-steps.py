#!/usr/bin/env python3
"""Copies molecule's output through and adds a CI stage line per molecule step (molecule prints none).

    molecule test -s drift 2>&1 | python3 scripts/ci-molecule-steps.py molecule-drift

After each "<scenario> ➜ <step>: Executed" it prints "== ci: stage molecule-drift/<step> <wall> s" (timed from that
step's "Executing" line) and appends it to $CI_LOGS/stages.txt, as scripts/ci-stage.sh does for whole stages.
At the end it prints the slowest plays ("== ci: slowest plays of molecule-drift": seconds, step, play name), timed
from one "PLAY [" line to the next, so the scenario's own critical path shows where its minutes go.
"""
import os
import re
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP = re.compile(r"➜ (\w+): (Executing|Executed)\b")
PLAY = re.compile(r"^\W*PLAY \[(.*?)(\]|$)")
SLOWEST = 12


class Plays(object):
    """Wall time of each play of each step."""

    def __init__(self):
        self.done, self.current, self.step = [], None, ""

    def start(self, name, now):
        self.stop(now)
        self.current = (name.strip(), self.step, now)

    def stop(self, now):
        if self.current:
            name, step, began = self.current
            self.done.append((now - began, step, name))
        self.current = None

    def report(self, prefix):
        lines = ["== ci: slowest plays of %s (wall s, step, play):\n" % prefix]
        for wall, step, name in sorted(self.done, reverse=True)[:SLOWEST]:
            lines.append("   %6.0f  %-11s %s\n" % (wall, step, name[:100]))
        return "".join(lines) if self.done else ""


def main(prefix):
    stages = os.path.join(os.environ.get("CI_LOGS", "reports/ci"), "stages.txt")
    started = {}
    plays = Plays()
    for raw in sys.stdin.buffer:
        sys.stdout.buffer.write(raw)
        line = ANSI.sub("", raw.decode("utf-8", "replace"))
        play = PLAY.match(line.replace("\u2502", " "))
        if play:
            plays.start(play.group(1), time.monotonic())
        match = STEP.search(line)
        if not match:
            continue
        step, what = match.groups()
        if what == "Executing":
            plays.stop(time.monotonic())
            plays.step = step
            started[step] = time.monotonic()
        elif step in started:
            plays.stop(time.monotonic())
            status = "" if "Successful" in line or "disabled" in line or "Missing" in line else " FAILED"
            stage = "== ci: stage %s/%s %.0f s%s\n" % (prefix, step, time.monotonic() - started.pop(step), status)
            sys.stdout.write(stage)
            with open(stages, "a", encoding="utf-8") as out:
                out.write(stage)
        sys.stdout.flush()
    plays.stop(time.monotonic())
    sys.stdout.write(plays.report(prefix))
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
