#!/usr/bin/python3
"""Wait until an SGLang server answers GET /health_generate with 200 (it really generates a token).

Gives up early when the unit stops being active or restarts (a crash loop), and at the timeout. On a host
without systemd (--pid instead of --unit), gives up when that process has exited.

A first start after an install compiles (Triton's kernels, FlashInfer's JIT modules) before it serves. With
--compile-dir, the timeout is the wait for a start that shows no compiling: past it, the wait goes on while the
server compiles (a compiler runs among its processes, or a file under a compile dir was written within
--compile-grace seconds), up to --max-timeout. A server that neither answers nor compiles is given up at the timeout.
Prints JSON {ready, waited_s, reason, status, main_pid, compiling}; exits 0 when ready, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request


def unit_state(unit):
    out = subprocess.run(["systemctl", "show", unit, "-p", "ActiveState", "-p", "NRestarts", "-p", "MainPID"],
                         capture_output=True, text=True, check=False).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def process_state(pid):
    """The unit_state() fields for a bare process: active while /proc/<pid> exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        state = "X"
    return {"ActiveState": "failed" if state in ("Z", "X") else "active", "NRestarts": "0", "MainPID": str(pid)}


# What FlashInfer's JIT (ninja, nvcc and its stages) and torch's extension builds run as child processes.
COMPILERS = frozenset(("ninja", "nvcc", "cicc", "ptxas", "nvlink", "fatbinary", "cudafe++", "cc1plus", "cc1",
                       "gcc", "g++", "c++", "ld", "as"))


def children(pid):
    """{pid: command name} of every process below PID (its whole tree), read from /proc."""
    parent, names = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, encoding="utf-8", errors="replace") as handle:
                head, tail = handle.read().rsplit(")", 1)
        except (OSError, ValueError):
            continue
        names[int(entry)] = head.split("(", 1)[-1]
        parent[int(entry)] = int(tail.split()[1])
    found, todo = {}, [pid]
    while todo:
        current = todo.pop()
        for child, ppid in parent.items():
            if ppid == current and child not in found:
                found[child] = names[child]
                todo.append(child)
    return found


def newest_write(folders):
    """The newest modification time of any file or folder under FOLDERS (links not followed; 0 when none)."""
    newest = 0.0
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                try:
                    newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
                except OSError:
                    pass
    return newest


def compiling(pid, folders, grace):
    """Why the server counts as compiling now (a compiler among its processes, or a compile dir written within
    GRACE seconds), or None."""
    if pid:
        running = sorted({name for name in children(pid).values() if name in COMPILERS})
        if running:
            return "%s running under pid %d" % (", ".join(running), pid)
    ago = time.time() - newest_write(folders)
    if folders and ago <= grace:
        return "a compile cache written %d s ago" % max(ago, 0)
    return None


def probe(url, key):
    request = urllib.request.Request(url)
    if key:
        request.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    watched = parser.add_mutually_exclusive_group(required=True)
    watched.add_argument("--unit")
    watched.add_argument("--pid", type=int, help="a server process started without systemd")
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--poll", type=float, default=10)
    parser.add_argument("--key-file")
    parser.add_argument("--compile-dir", action="append", default=[],
                        help="a folder the server compiles into (Triton's cache, FlashInfer's workspace)")
    parser.add_argument("--compile-grace", type=float, default=300)
    parser.add_argument("--max-timeout", type=float, help="the longest wait while the server compiles")
    args = parser.parse_args()
    limit = max(args.timeout, args.max_timeout or 0) if args.compile_dir else args.timeout
    key = None
    if args.key_file:
        with open(args.key_file, encoding="utf-8") as handle:
            key = handle.read().strip()
    state_of = (lambda: process_state(args.pid)) if args.pid else (lambda: unit_state(args.unit))
    name = "process %d" % args.pid if args.pid else "unit %s" % args.unit
    start = time.monotonic()
    first = state_of()
    status, reason, seen = None, None, None
    while time.monotonic() - start < limit:
        status = probe(args.url, key)
        if status == 200:
            reason = "ready"
            break
        state = state_of()
        if state.get("ActiveState") not in ("active", "activating", "reloading"):
            reason = "%s is %s" % (name, state.get("ActiveState"))
            break
        if state.get("NRestarts") != first.get("NRestarts"):
            reason = "%s restarted (crashed) while loading" % name
            break
        if args.compile_dir and time.monotonic() - start >= args.timeout:
            now = compiling(int(state.get("MainPID") or 0), args.compile_dir, args.compile_grace)
            if now is None:
                reason = "no 200 from %s within %d s, and no compiling in the last %d s (last answer: %s)" % (
                    args.url, time.monotonic() - start, args.compile_grace, status or "no connection")
                break
            seen = now
        time.sleep(args.poll)
    if reason is None:
        reason = "no 200 from %s within %d s (last answer: %s)" % (args.url, limit, status or "no connection")
    result = {"ready": reason == "ready", "waited_s": round(time.monotonic() - start, 1), "reason": reason,
              "status": status, "main_pid": state_of().get("MainPID"), "compiling": seen}
    print(json.dumps(result))
    return 0 if result["ready"] else 1


if __name__ == "__main__":
    sys.exit(main())
