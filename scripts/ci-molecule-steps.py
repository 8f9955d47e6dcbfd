#!/usr/bin/env python3
"""Copies molecule's output through and adds a CI stage line per molecule step (molecule prints none).

    molecule test -s drift 2>&1 | python3 scripts/ci-molecule-steps.py molecule-drift

After each "<scenario> ➜ <step>: Executed" it prints "== ci: stage molecule-drift/<step> <wall> s" (timed from that
step's "Executing" line) and appends it to $CI_LOGS/stages.txt, as scripts/ci-stage.sh does for whole stages.
"""
import os
import re
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STEP = re.compile(r"➜ (\w+): (Executing|Executed)\b")


def main(prefix):
    stages = os.path.join(os.environ.get("CI_LOGS", "reports/ci"), "stages.txt")
    started = {}
    for raw in sys.stdin.buffer:
        sys.stdout.buffer.write(raw)
        line = ANSI.sub("", raw.decode("utf-8", "replace"))
        match = STEP.search(line)
        if not match:
            continue
        step, what = match.groups()
        if what == "Executing":
            started[step] = time.monotonic()
        elif step in started:
            status = "" if "Successful" in line or "disabled" in line or "Missing" in line else " FAILED"
            stage = "== ci: stage %s/%s %.0f s%s\n" % (prefix, step, time.monotonic() - started.pop(step), status)
            sys.stdout.write(stage)
            with open(stages, "a", encoding="utf-8") as out:
                out.write(stage)
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
