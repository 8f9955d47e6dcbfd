#!/usr/bin/python3
"""Print the journal of a unit's current start (or a server's log file) with the server API key taken out.

SGLang logs its whole server_args at start-up, the API key included, and the role prints journal lines (the
fusion proof, a failed start). Everything the role shows from the journal, or from the log file of a host without
one (--file), goes through here: the key itself, read from its file, and any api_key / admin_api_key / --api-key
value are replaced by <redacted>.
"""
import argparse
import json
import re
import subprocess
import sys

REDACTED = "<redacted>"
# server_args as a Python dict repr or JSON, and command lines.
# A quoted value may hold its own quote escaped (repr and JSON escape it): a backslash and the next character
# are taken whole.
_QUOTED = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'
PATTERNS = [
    re.compile(r"""((?:'|")(?:admin_)?api_key(?:'|")\s*[:=]\s*)(""" + _QUOTED + ")"),
    re.compile(r"""((?:admin_)?api_key=)(""" + _QUOTED + r"""|[^,\s)]+)"""),
    re.compile(r"""(--(?:admin-)?api-key[=\s]+)(\S+)"""),
]


def _keep_quotes(match):
    value = match.group(2)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return match.group(1) + quote + REDACTED + quote


def _spellings(key):
    """The key as written, and as a Python repr and JSON write it inside quotes (a quote or backslash escaped)."""
    return sorted({key, repr(key)[1:-1], json.dumps(key)[1:-1]}, key=len, reverse=True)


def redact(text, keys):
    for key in keys:
        for spelling in _spellings(key) if key else ():
            text = text.replace(spelling, REDACTED)
    for pattern in PATTERNS:
        text = pattern.sub(_keep_quotes, text)
    return text


def read_keys(paths):
    keys = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                keys.append(handle.read().strip())
        except OSError:
            pass
    return keys


def print_file(path, lines, keys):
    """The log file, redacted (the last LINES lines where LINES > 0); a file that cannot be read: rc 1, why."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        sys.stderr.write("cannot read the server's log file %s: %s\n" % (path, exc.strerror or exc))
        return 1
    if lines > 0:
        text = "".join(text.splitlines(True)[-lines:])
    sys.stdout.write(redact(text, keys))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--unit", help="the journal of this unit's current start")
    source.add_argument("--file", help="this log file instead (a host without a journal)")
    parser.add_argument("--lines", type=int, default=0, help="only the last N lines (0: all)")
    parser.add_argument("--key-file", action="append", default=[])
    args = parser.parse_args()
    keys = read_keys(args.key_file)
    if args.file:
        return print_file(args.file, args.lines, keys)
    invocation = subprocess.run(["systemctl", "show", "-p", "InvocationID", "--value", args.unit],
                                capture_output=True, text=True, check=False).stdout.strip()
    cmd = ["journalctl", "-u", args.unit, "--no-pager", "-o", "cat"]
    if args.lines:
        cmd += ["-n", str(args.lines)]
    cmd.append("_SYSTEMD_INVOCATION_ID=" + invocation)  # this start only (empty: nothing, as no start is running)
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
    sys.stdout.write(redact(proc.stdout, keys))
    sys.stderr.write(redact(proc.stderr, keys))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
