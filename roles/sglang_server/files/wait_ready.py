#!/usr/bin/python3
"""Wait until an SGLang server answers GET /health_generate with 200 (it really generates a token).

Gives up early when the unit stops being active or restarts (a crash loop), and at the timeout. On a host
without systemd (--pid instead of --unit), gives up when that process has exited.
Prints JSON {ready, waited_s, reason, status}; exits 0 when ready, 1 otherwise.
"""
import argparse
import json
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
    args = parser.parse_args()
    key = None
    if args.key_file:
        with open(args.key_file, encoding="utf-8") as handle:
            key = handle.read().strip()
    state_of = (lambda: process_state(args.pid)) if args.pid else (lambda: unit_state(args.unit))
    name = "process %d" % args.pid if args.pid else "unit %s" % args.unit
    start = time.monotonic()
    first = state_of()
    status, reason = None, None
    while time.monotonic() - start < args.timeout:
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
        time.sleep(args.poll)
    if reason is None:
        reason = "no 200 from %s within %d s (last answer: %s)" % (args.url, args.timeout, status or "no connection")
    result = {"ready": reason == "ready", "waited_s": round(time.monotonic() - start, 1), "reason": reason,
              "status": status, "main_pid": state_of().get("MainPID")}
    print(json.dumps(result))
    return 0 if result["ready"] else 1


if __name__ == "__main__":
    sys.exit(main())
