#!/usr/bin/env python3
"""How busy the whole machine's CPU was during CI: whether the lanes waited on each other's CPU or on I/O.

    python3 scripts/ci_cpu_usage.py record FILE [--every SECONDS]   (until stopped: SIGTERM or SIGINT)
    python3 scripts/ci_cpu_usage.py summary FILE

`record` appends the kernel's CPU counters (/proc/stat's "cpu" line, all cores together) with the time to FILE every
few seconds; scripts/test-all.sh runs it beside the lanes. The stages' own CPU figures count only their process
trees: the lab hosts' processes (systemd, the stand-in servers, the modules Ansible runs there) are counted here.
`summary` (which scripts/ci-summary.py prints) says what share of the machine was busy over the whole run and in
each five-minute window: near 100 % a lane waited on the CPU, so only less work shortens the run, not more overlap.
"""
import argparse
import os
import signal
import sys
import time

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
WINDOW_S = 300


def parse_stat(text):
    """The aggregate "cpu" line of /proc/stat as {field: ticks} (guest time is inside user and nice already)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(value) for value in parts[1:1 + len(FIELDS)]]
            return dict(zip(FIELDS, values + [0] * (len(FIELDS) - len(values))))
    raise ValueError("no aggregate cpu line")


def read_samples(path):
    """[(seconds, {field: ticks}), ...] from a record file; a line cut short by the stop is left out."""
    samples = []
    with open(path, encoding="ascii") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) != 1 + len(FIELDS):
                continue
            try:
                samples.append((float(parts[0]), dict(zip(FIELDS, (int(value) for value in parts[1:])))))
            except ValueError:
                continue
    return samples


def shares(first, last):
    """Each field's share (0..1) of all ticks between two samples; None where no tick passed."""
    delta = {field: last[field] - first[field] for field in FIELDS}
    total = sum(delta.values())
    if total <= 0:
        return None
    return {field: float(delta[field]) / total for field in FIELDS}


def busy(share):
    return 1.0 - share["idle"] - share["iowait"]


def windows(samples, width=WINDOW_S):
    """The busy share of each window of `width` seconds from the first sample (the last one may be shorter)."""
    result = []
    if not samples:
        return result
    start = samples[0]
    for sample in samples[1:]:
        if sample[0] - start[0] >= width or sample is samples[-1]:
            share = shares(start[1], sample[1])
            if share is not None:
                result.append(busy(share))
            start = sample
    return result


def summary(path, cores=None):
    """One line for the end of CI's log."""
    try:
        samples = read_samples(path)
    except OSError as error:
        return "== ci: (no CPU record: %s)" % error
    share = shares(samples[0][1], samples[-1][1]) if len(samples) > 1 else None
    if share is None:
        return "== ci: (no CPU record: fewer than two samples in %s)" % path
    seconds = samples[-1][0] - samples[0][0]
    return ("== ci: the machine's CPU (%s cores) over %.0f s: %.0f%% busy (user %.0f, nice %.0f, system %.0f; iowait "
            "%.0f, steal %.0f); busy by %d minutes: %s" % (
                cores or "?", seconds, 100 * busy(share), 100 * share["user"], 100 * share["nice"],
                100 * (share["system"] + share["irq"] + share["softirq"]), 100 * share["iowait"],
                100 * share["steal"], WINDOW_S // 60,
                " ".join("%.0f" % (100 * value) for value in windows(samples))))


def record(path, every):
    stop = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.append(True))
    with open(path, "a", encoding="ascii") as handle:
        while True:
            with open("/proc/stat", encoding="ascii") as stat:
                counters = parse_stat(stat.read())
            handle.write("%.1f %s\n" % (time.time(), " ".join(str(counters[field]) for field in FIELDS)))
            handle.flush()
            if stop:
                return 0
            # After a stop signal, one last sample for the run's end, within half a second.
            deadline = time.monotonic() + every
            while not stop and time.monotonic() < deadline:
                time.sleep(0.5)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("action", choices=["record", "summary"])
    parser.add_argument("file")
    parser.add_argument("--every", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.action == "record":
        return record(args.file, args.every)
    print(summary(args.file, os.cpu_count()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
