#!/usr/bin/python3
"""Wait until an SGLang server answers GET /health_generate with 200 (it really generates a token).

Gives up early when the unit stops being active or restarts (a crash loop), and at the timeout.
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
    parser.add_argument("--unit", required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--poll", type=float, default=10)
    parser.add_argument("--key-file")
    args = parser.parse_args()
    key = None
    if args.key_file:
        with open(args.key_file, encoding="utf-8") as handle:
            key = handle.read().strip()
    start = time.monotonic()
    first = unit_state(args.unit)
    status, reason = None, None
    while time.monotonic() - start < args.timeout:
        status = probe(args.url, key)
        if status == 200:
            reason = "ready"
            break
        state = unit_state(args.unit)
        if state.get("ActiveState") not in ("active", "activating", "reloading"):
            reason = "unit %s is %s" % (args.unit, state.get("ActiveState"))
            break
        if state.get("NRestarts") != first.get("NRestarts"):
            reason = "unit %s restarted (crashed) while loading" % args.unit
            break
        time.sleep(args.poll)
    if reason is None:
        reason = "no 200 from %s within %d s (last answer: %s)" % (args.url, args.timeout, status or "no connection")
    result = {"ready": reason == "ready", "waited_s": round(time.monotonic() - start, 1), "reason": reason,
              "status": status, "main_pid": unit_state(args.unit).get("MainPID")}
    print(json.dumps(result))
    return 0 if result["ready"] else 1


if __name__ == "__main__":
    sys.exit(main())
