#!/usr/bin/env python3
"""The logic of lab/bench-fleet.sh: reading ansible-playbook logs and writing the fleet table.

  fleet_bench.py recap LOG COUNT [--no-change]   the PLAY RECAP holds COUNT hosts, none failed or unreachable
                                                 (and with --no-change, none changed); exit 1 with the reason
  fleet_bench.py phases LOG                      seconds per play (JSON), from the profile_tasks timestamps
  fleet_bench.py row KEY=VALUE ...               one row as a JSON line (a VALUE that parses as JSON is taken as
                                                 such: numbers, lists; anything else is a string)
  fleet_bench.py table ROWS.jsonl OUT.json       the table (ratios to the smallest fleet) on stdout, JSON to OUT
  fleet_bench.py markdown FLEET.json             the written table as Markdown (for docs/fleet-scale.md)

A log is the default callback's output with ansible.posix.profile_tasks enabled (each task header is followed by
a line such as "Tuesday 01 December 2026  05:40:01 +0000 (0:00:01.234)       0:00:12.345 ****", the last field
being the time since the playbook started).
"""
import json
import re
import sys

RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")
PLAY = re.compile(r"^PLAY \[(?P<name>.*)\] \*+$")
STAMP = re.compile(r"\(\d+:\d\d:\d\d\.\d+\)\s+(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d\.\d+) \*+\s*$")
# The figures every row must have (the schema); everything else is context for judging them.
FIGURES = ("first_converge_s", "noop_s", "drift_s")


def recap(text):
    """{host: {counter: n}} from the PLAY RECAP section of a log."""
    hosts = {}
    in_recap = False
    for line in text.splitlines():
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        match = RECAP.match(line.strip()) if in_recap else None
        if match:
            hosts[match["host"]] = {k: int(v) for k, v in (c.split("=") for c in match["counts"].split())}
    return hosts


def recap_problems(text, count, no_change=False):
    """What is wrong with a run's recap for a fleet of `count` hosts (an empty list when nothing is)."""
    hosts = recap(text)
    problems = []
    if len(hosts) != count:
        problems.append("the recap lists %d hosts, not %d" % (len(hosts), count))
    for host, counts in sorted(hosts.items()):
        for counter in ("failed", "unreachable") + (("changed",) if no_change else ()):
            if counts.get(counter, 0):
                problems.append("%s: %s=%d" % (host, counter, counts[counter]))
    return problems


def phases(text):
    """[[play name, seconds]] in order of first appearance; a play run in serial batches counts from its first
    batch to the next play (so the rolling restart's batches add up to one phase)."""
    starts = []  # [(name, elapsed at its first task)]
    pending = None
    last = None
    for line in text.splitlines():
        play = PLAY.match(line)
        if play:
            if not any(name == play["name"] for name, _ in starts):
                pending = play["name"]
            continue
        stamp = STAMP.search(line)
        if stamp:
            last = int(stamp["h"]) * 3600 + int(stamp["m"]) * 60 + float(stamp["s"])
            if pending is not None:
                starts.append((pending, last))
                pending = None
    if last is None:
        return []
    ends = [start for _, start in starts[1:]] + [last]
    return [[name, round(end - start, 1)] for (name, start), end in zip(starts, ends)]


def table(rows):
    """The printed table: one line per fleet size, the figures and their ratio to the smallest fleet measured."""
    rows = sorted(rows, key=lambda row: row["hosts"])
    base = rows[0] if rows else None
    lines = ["%5s  %18s  %14s  %14s  %s" % ("hosts", "first converge s", "no-op s", "drift s", "load (1 min)")]
    for row in rows:
        cells = []
        for key in FIGURES:
            value, ref = row.get(key), base.get(key)
            if value is None:
                cells.append("-")
            elif ref:
                cells.append("%.1f (%.2fx)" % (value, value / ref))
            else:
                cells.append("%.1f" % value)
        load = row.get("loadavg_before", ["?"])[0]
        lines.append("%5d  %18s  %14s  %14s  %s" % (row["hosts"], cells[0], cells[1], cells[2], load))
    if base:
        lines.append("(ratios to %d hosts)" % base["hosts"])
    return "\n".join(lines)


def markdown(rows):
    """The table as Markdown: figures with their ratio, each deploy run's restart play, the load before the size."""
    lines = ["| hosts | first converge s | of which rolling restart s | no-op s | drift s | load (1 min) before |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        cells = []
        for key in FIGURES:
            value, ratio = row.get(key), row.get(key.replace("_s", "_ratio"))
            cells.append("-" if value is None else "%.1f (%.2fx)" % (value, ratio) if ratio else "%.1f" % value)
        restart = [seconds for name, seconds in row.get("first_converge_plays", []) if name.startswith("Restart")]
        lines.append("| %d | %s | %s | %s | %s | %s |" % (
            row["hosts"], cells[0], "%.1f" % restart[0] if restart else "-", cells[1], cells[2],
            row.get("loadavg_before", ["?"])[0]))
    return "\n".join(lines)


def with_ratios(rows):
    """The rows sorted by size, each with <figure>_ratio to the smallest fleet (None where a figure is missing)."""
    rows = sorted(rows, key=lambda row: row["hosts"])
    for row in rows:
        for key in FIGURES:
            value, ref = row.get(key), rows[0].get(key)
            row[key.replace("_s", "_ratio")] = round(value / ref, 2) if value is not None and ref else None
    return rows


def row(pairs):
    """{key: value} from KEY=VALUE arguments; a value is JSON when it parses as JSON, else the string itself."""
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError("not KEY=VALUE: %r" % pair)
        try:
            result[key] = json.loads(value)
        except ValueError:
            result[key] = value
    if not isinstance(result.get("hosts"), int):
        raise ValueError("a row needs hosts=N")
    return result


def main(argv):
    try:
        if argv[1:2] == ["recap"] and len(argv) in (4, 5):
            problems = recap_problems(open(argv[2], encoding="utf-8").read(), int(argv[3]),
                                      no_change=argv[4:] == ["--no-change"])
            for problem in problems:
                print("recap: %s" % problem, file=sys.stderr)
            return 1 if problems else 0
        if argv[1:2] == ["phases"] and len(argv) == 3:
            print(json.dumps(phases(open(argv[2], encoding="utf-8").read())))
            return 0
        if argv[1:2] == ["markdown"] and len(argv) == 3:
            with open(argv[2], encoding="utf-8") as stream:
                print(markdown(json.load(stream)))
            return 0
        if argv[1:2] == ["row"]:
            print(json.dumps(row(argv[2:]), sort_keys=True))
            return 0
        if argv[1:2] == ["table"] and len(argv) == 4:
            with open(argv[2], encoding="utf-8") as stream:
                rows = [json.loads(line) for line in stream if line.strip()]
            # A later run of the same size replaces an earlier one.
            rows = list({row["hosts"]: row for row in rows}.values())
            rows = with_ratios(rows)
            print(table(rows))
            with open(argv[3], "w", encoding="utf-8") as out:
                json.dump(rows, out, indent=1, sort_keys=True)
                out.write("\n")
            return 0
    except (OSError, ValueError, KeyError) as exc:
        print("fleet_bench: %s" % exc, file=sys.stderr)
        return 2
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
