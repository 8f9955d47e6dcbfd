#!/usr/bin/env python3
"""The logic of lab/bench-fleet.sh: reading ansible-playbook logs and writing the fleet table.

  fleet_bench.py recap LOG COUNT [--no-change]   the PLAY RECAP holds COUNT hosts, none failed or unreachable
                                                 (and with --no-change, none changed); exit 1 with the reason
  fleet_bench.py phases LOG                      seconds per play (JSON), from the profile_tasks timestamps
  fleet_bench.py runs SSHLOG COUNT [--max KIND]  round trips per host from lab/count-ssh.sh's log: for each kind
                                                 (module, shell, transfer, control, all) max/mean/min over the
                                                 COUNT hosts as JSON, or with --max KIND only that maximum; exit 2
                                                 when the log does not name exactly COUNT hosts
  fleet_bench.py timed OUT.json [--control-dir DIR] -- COMMAND ...
                                                 runs COMMAND; writes its wall seconds and the user+sys CPU seconds
                                                 of it and its children to OUT.json; exits with its status. With
                                                 --control-dir, the ssh control masters whose sockets are in DIR
                                                 are stopped and waited for first, so their CPU counts too
  fleet_bench.py cpu OUT.json COUNT              user+sys seconds per host (from timed's OUT.json)
  fleet_bench.py same-report A.json B.json       two drift reports (scripts/drift_report.py --json) hold the same
                                                 checks for the same hosts (task, item, drifted); exit 1 naming
                                                 what differs (a run under another strategy against the linear one)
  fleet_bench.py row KEY=VALUE ...               one row as a JSON line (a VALUE that parses as JSON is taken as
                                                 such: numbers, lists; anything else is a string)
  fleet_bench.py table ROWS.jsonl OUT.json       the table (ratios to the smallest fleet) on stdout, JSON to OUT
  fleet_bench.py markdown FLEET.json             the written table as Markdown (for docs/fleet-scale.md)
  fleet_bench.py summary FLEET.json              the fast path's no-op and drift at the smallest and largest
                                                 fleet, as the README's lines

A log is the default callback's output with ansible.posix.profile_tasks enabled (each task header is followed by
a line such as "Tuesday 01 December 2026  05:40:01 +0000 (0:00:01.234)       0:00:12.345 ****", the last field
being the time since the playbook started). An ssh log has a line per ssh/sftp/scp run: HOST:PORT, a tab, the
kind (module: the remote command runs a Python interpreter, i.e. one module run; shell; transfer; control), and
any further tab-separated fields (count-ssh.sh writes the time).
"""
import ctypes
import glob
import json
import os
import re
import resource
import subprocess
import sys
import time

RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")
PLAY = re.compile(r"^PLAY \[(?P<name>.*)\] \*+$")
STAMP = re.compile(r"\(\d+:\d\d:\d\d\.\d+\)\s+(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d\.\d+) \*+\s*$")
# The timed figures, each with its ratio to the smallest fleet: the first converge, then the no-op deploy and the
# drift check on the default path (the fast path) and with -e deploy_fast_path=false (full roles), then the same
# four under Mitogen's strategy (FLEET_BENCH_MITOGEN=1 only), and the fast path's two with OpenSSH's default key
# exchange (ssh_kex_default) instead of the lab inventory's (ssh_kex). hosts, noop_s and drift_s are the schema.
RUNS = ("noop", "noop_full", "drift", "drift_full")
MITOGEN_RUNS = tuple(name + "_mitogen" for name in RUNS)
KEX_RUNS = ("noop_default_kex", "drift_default_kex")
FIGURES = ("first_converge_s",) + tuple(name + "_s" for name in RUNS + MITOGEN_RUNS + KEX_RUNS)
# What count-ssh.sh tells apart; "all" is their sum (every round trip).
KINDS = ("module", "shell", "transfer", "control")


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


def ssh_log(text):
    """{host: {kind: n}} from count-ssh.sh's log (HOST:PORT<TAB>KIND[<TAB>...] a line)."""
    counts = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2 or not fields[0] or fields[1] not in KINDS:
            raise ValueError("ssh log line %d is not HOST<TAB>KIND (%s): %r" % (number, "/".join(KINDS), line))
        counts.setdefault(fields[0], dict.fromkeys(KINDS, 0))[fields[1]] += 1
    return counts


def runs(counts, count):
    """{kind: {max, mean, min}} over the hosts of {host: {kind: n}} ("all": every round trip), with "hosts";
    ValueError unless it names exactly `count` hosts (a run that reached fewer hosts, or a log shared with
    another run, would give figures of some other fleet)."""
    if len(counts) != count:
        raise ValueError("the ssh log names %d hosts (%s), not %d" % (
            len(counts), " ".join(sorted(counts)) or "none", count))
    summary = {"hosts": count}
    for kind in KINDS + ("all",):
        values = [sum(per.values()) if kind == "all" else per[kind] for per in counts.values()]
        summary[kind] = {"max": max(values), "mean": round(sum(values) / count, 2), "min": min(values)}
    return summary


def _subreaper():
    """Make this process the reaper of its orphaned descendants (Linux), so the CPU of an ssh control master
    that detached from the run (ControlPersist) is in RUSAGE_CHILDREN once it is waited for."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _stop_masters(control_dir, deadline_s=15.0):
    """Stop the ssh control masters listening in control_dir and wait for every orphan re-parented here."""
    for socket in sorted(glob.glob(os.path.join(control_dir, "*"))):
        subprocess.call(["ssh", "-o", "ControlPath=%s" % socket, "-O", "exit", "fleet-bench"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def timed(out, command, control_dir=None):
    """Run `command`, write {wall_s, user_s, sys_s, cpu_s, rc, subreaper} to `out`, return its exit status.
    user/sys are RUSAGE_CHILDREN: the command and every descendant that was waited for (Ansible's forks, each
    ssh client); with control_dir, also the control masters of that directory (see _stop_masters)."""
    reaping = _subreaper() if control_dir else False
    start = time.monotonic()
    try:
        rc = subprocess.call(command)
    except OSError as exc:
        raise ValueError("cannot run %s: %s" % (command[0], exc)) from exc
    wall = time.monotonic() - start
    if control_dir:
        _stop_masters(control_dir)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {"wall_s": round(wall, 2), "user_s": round(usage.ru_utime, 2), "sys_s": round(usage.ru_stime, 2),
              "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "rc": rc,
              "control_masters_counted": reaping}
    with open(out, "w", encoding="utf-8") as stream:
        json.dump(result, stream, sort_keys=True)
        stream.write("\n")
    return rc


def cpu_per_host(result, count):
    """CPU seconds per host of a timed run (its user+sys divided by the fleet size)."""
    return round(result["cpu_s"] / count, 3)


def report_checks(report):
    """{host: sorted [(task, item, drifted)]} of a drift report (scripts/drift_report.py --json)."""
    return {host: sorted((str(check.get("task")), str(check.get("item")), bool(check.get("drifted")))
                         for check in entry.get("checks", []))
            for host, entry in report.get("hosts", {}).items()}


def report_differences(first, second):
    """What two drift reports disagree on, one line each (an empty list when they hold the same checks)."""
    first, second = report_checks(first), report_checks(second)
    lines = []
    for host in sorted(set(first) | set(second)):
        if host not in first or host not in second:
            lines.append("%s: only in the %s report" % (host, "first" if host in first else "second"))
            continue
        only_first = sorted(set(first[host]) - set(second[host]))
        only_second = sorted(set(second[host]) - set(first[host]))
        if only_first or only_second or len(first[host]) != len(second[host]):
            lines.append("%s: %d checks against %d" % (host, len(first[host]), len(second[host])))
            lines += ["%s: only in the first: %s / %s (drifted %s)" % ((host,) + check) for check in only_first]
            lines += ["%s: only in the second: %s / %s (drifted %s)" % ((host,) + check) for check in only_second]
    return lines


def ratio_key(key):
    """noop_s -> noop_ratio"""
    return key[:-len("_s")] + "_ratio"


def _figure(row, key, ratio=None):
    """A figure with its ratio to the smallest fleet ("17.7 (1.00x)"), or "-" where it was not measured."""
    value = row.get(key)
    if value is None:
        return "-"
    return "%.1f (%.2fx)" % (value, ratio) if ratio else "%.1f" % value


def _pair(row, first, second, form):
    """Two figures as first/second (the fast path and the full roles), "-" for one not measured."""
    values = [row.get(first), row.get(second)]
    if values == [None, None]:
        return "-"
    return "/".join("-" if value is None else form % value for value in values)


def _columns(rows):
    """[(short header, Markdown header, cell(row, ratio_of))] of the table: the timed figures, then module runs and
    controller CPU per host as fast/full pairs, then Mitogen's (only when a row has them)."""
    columns = [("first converge s", "first converge s",
                lambda row, ratio: _figure(row, "first_converge_s", ratio("first_converge_s")))]
    for name, header in (("noop", "no-op s"), ("noop_full", "no-op full s"), ("drift", "drift s"),
                         ("drift_full", "drift full s")):
        columns.append((header, header, lambda row, ratio, key=name + "_s": _figure(row, key, ratio(key))))
    if any(row.get(name + "_s") is not None for row in rows for name in KEX_RUNS):
        for run, header in (("noop_default_kex", "no-op s, default kex"),
                            ("drift_default_kex", "drift s, default kex")):
            columns.append((header, header, lambda row, ratio, key=run + "_s": _figure(row, key, ratio(key))))
    for run, header in (("noop", "no-op"), ("drift", "drift")):
        columns.append(("runs " + header, "module runs/host %s" % header, lambda row, ratio, run=run: _pair(
            row, run + "_module_runs_per_host", run + "_full_module_runs_per_host", "%d")))
    for run, header in (("noop", "no-op"), ("drift", "drift")):
        columns.append(("cpu/h " + header, "CPU s/host %s" % header, lambda row, ratio, run=run: _pair(
            row, run + "_cpu_s_per_host", run + "_full_cpu_s_per_host", "%.2f")))
    if any(row.get(name + "_s") is not None for row in rows for name in MITOGEN_RUNS):
        for run, header in (("noop", "no-op"), ("drift", "drift")):
            columns.append(("mitogen %s s" % header, "Mitogen %s s" % header, lambda row, ratio, run=run: _pair(
                row, run + "_mitogen_s", run + "_full_mitogen_s", "%.1f")))
        for run, header in (("noop", "no-op"), ("drift", "drift")):
            columns.append(("mitogen cpu/h %s" % header, "Mitogen CPU s/host %s" % header,
                            lambda row, ratio, run=run: _pair(
                                row, run + "_mitogen_cpu_s_per_host", run + "_full_mitogen_cpu_s_per_host", "%.2f")))
    return columns


def _report_notes(rows):
    """A line for each Mitogen drift run whose report differs from the linear strategy's run of the same path."""
    return ["%s at %d hosts: its drift report differs from the linear strategy's (see %s-report-diff.txt)"
            % (name, row["hosts"], name) for row in rows for name in MITOGEN_RUNS
            if row.get(name + "_report_as_linear") is False]


LEGEND = ("a/b: fast path / full roles (-e deploy_fast_path=false); runs, module runs/host: module runs of the "
          "busiest host, counted; cpu/h, CPU s/host: the controller's user+sys seconds of the run divided by the "
          "hosts; default kex: the fast path with OpenSSH's default key exchange (the row's ssh_kex_default) instead "
          "of the lab inventory's (ssh_kex)")


def table(rows):
    """The printed table: one line per fleet size, the figures (with their ratio to the smallest fleet measured),
    module runs and controller CPU per host, the load before the size."""
    rows = sorted(rows, key=lambda row: row["hosts"])
    base = rows[0] if rows else {}
    columns = _columns(rows)
    cells = [["hosts"] + [header for header, _, _ in columns] + ["load (1 min)"]]

    def ratio(row):
        return lambda key: row[key] / base[key] if row.get(key) is not None and base.get(key) else None
    for row in rows:
        cells.append(["%d" % row["hosts"]] + [cell(row, ratio(row)) for _, _, cell in columns]
                     + ["%s" % row.get("loadavg_before", ["?"])[0]])
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(text.rjust(width) if i < len(widths) - 1 else text
                       for i, (text, width) in enumerate(zip(line, widths))) for line in cells]
    if rows:
        lines += ["(%s)" % note for note in _report_notes(rows)]
        lines.append("(%s)" % LEGEND)
        lines.append("(ratios to %d hosts)" % base["hosts"])
    return "\n".join(lines)


def markdown(rows):
    """The table as Markdown: figures with their ratio, each deploy run's restart play, module runs and CPU per
    host, the load before the size."""
    columns = _columns(rows)
    headers = ["hosts", "first converge s", "of which rolling restart s"] + [h for _, h, _ in columns[1:]]
    lines = ["| %s | load (1 min) before |" % " | ".join(headers), "|%s" % ("---|" * (len(headers) + 1))]
    for row in rows:
        restart = [seconds for name, seconds in row.get("first_converge_plays", []) if name.startswith("Restart")]
        cells = ["%d" % row["hosts"], columns[0][2](row, lambda key, row=row: row.get(ratio_key(key))),
                 "%.1f" % restart[0] if restart else "-"]
        cells += [cell(row, lambda key, row=row: row.get(ratio_key(key))) for _, _, cell in columns[1:]]
        lines.append("| %s | %s |" % (" | ".join(cells), row.get("loadavg_before", ["?"])[0]))
    if rows:
        lines.append("")
        lines.append(LEGEND + ".")
        lines += [note + "." for note in _report_notes(rows)]
    return "\n".join(lines)


def readme_lines(rows):
    """The README's lines: the fast path's no-op deploy and drift check at the smallest and the largest fleet
    measured, with their ratio, the key exchange and the module runs a host (counted), and the same with OpenSSH's
    default key exchange where measured."""
    rows = sorted(rows, key=lambda row: row["hosts"])
    small, large = rows[0], rows[-1]

    def figure(key, label):
        if small.get(key) is None or large.get(key) is None:
            return None
        return "%s %.1f s at %d hosts, %.1f s at %d (%.2fx)" % (label, small[key], small["hosts"], large[key],
                                                               large["hosts"], large[key] / small[key])
    lines = []
    for run, label in (("noop", "no-op deploy"), ("drift", "drift check")):
        text = figure(run + "_s", label)
        if text is None:
            continue
        runs = large.get(run + "_module_runs_per_host")
        kex = figure(run + "_default_kex_s", "with OpenSSH's default key exchange%s"
                     % (" (%s)" % large["ssh_kex_default"] if large.get("ssh_kex_default") else ""))
        lines.append("- %s%s%s%s" % (text, ", ssh key exchange %s" % large["ssh_kex"] if large.get("ssh_kex") else "",
                                     "; module runs a host: %d, counted" % runs if runs is not None else "",
                                     "; %s" % kex if kex else ""))
    return "\n".join(lines)


def with_ratios(rows):
    """The rows sorted by size, each with <figure>_ratio to the smallest fleet (None where a figure is missing)."""
    rows = sorted(rows, key=lambda row: row["hosts"])
    for row in rows:
        for key in FIGURES:
            value, ref = row.get(key), rows[0].get(key)
            row[ratio_key(key)] = round(value / ref, 2) if value is not None and ref else None
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
        if argv[1:2] == ["summary"] and len(argv) == 3:
            with open(argv[2], encoding="utf-8") as stream:
                print(readme_lines(json.load(stream)))
            return 0
        if argv[1:2] == ["runs"] and (len(argv) == 4 or len(argv) == 6 and argv[4] == "--max"):
            with open(argv[2], encoding="utf-8") as stream:
                summary = runs(ssh_log(stream.read()), int(argv[3]))
            if len(argv) == 6:
                if argv[5] not in summary or argv[5] == "hosts":
                    raise ValueError("--max takes one of %s" % ", ".join(KINDS + ("all",)))
                print(summary[argv[5]]["max"])
            else:
                print(json.dumps(summary, sort_keys=True))
            return 0
        if argv[1:2] == ["timed"] and "--" in argv[3:] and argv[-1] != "--":
            split = argv.index("--", 3)
            options = argv[3:split]
            if options and (len(options) != 2 or options[0] != "--control-dir"):
                raise ValueError("timed OUT.json [--control-dir DIR] -- COMMAND ...")
            return timed(argv[2], argv[split + 1:], control_dir=options[1] if options else None)
        if argv[1:2] == ["cpu"] and len(argv) == 4:
            with open(argv[2], encoding="utf-8") as stream:
                print(cpu_per_host(json.load(stream), int(argv[3])))
            return 0
        if argv[1:2] == ["same-report"] and len(argv) == 4:
            reports = []
            for path in argv[2:]:
                with open(path, encoding="utf-8") as stream:
                    reports.append(json.load(stream))
            differences = report_differences(*reports)
            for line in differences:
                print("same-report: %s" % line, file=sys.stderr)
            return 1 if differences else 0
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
