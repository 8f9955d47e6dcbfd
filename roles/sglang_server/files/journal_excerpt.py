#!/usr/bin/python3
"""Print the journal of a unit's current start (or a server's log file) with the server API key taken out.

SGLang logs its whole server_args at start-up, the API key included, and the role prints journal lines (the
fusion proof, a failed start). Everything the role shows from the journal, or from the log file of a host without
one (--file), goes through here: the key itself, read from its file, and any api_key / admin_api_key / --api-key
value are replaced by <redacted>, in every escaping a repr or JSON gives them and in each nested in the other.
"""
import argparse
import json
import re
import subprocess
import sys

REDACTED = "<redacted>"
# A key field, as a Python repr (server_args={'api_key': ...}, ServerArgs(api_key=...)) or JSON writes it, also
# nested: a repr inside a JSON string escapes its quotes' backslashes again (\\'), a JSON text inside a JSON string
# escapes its quotes (\"api_key\": \"...\"). The value opens with a quote after as many backslashes as its level
# needs, and ends at the same quote where the field does: followed by ',', '}', ')', ']' or the end of the line.
# Backslashes inside the value are not counted (their number depends on the level, which the text does not say):
# the value runs to that boundary, so a key holding quotes is never cut short.
_FIELD = re.compile(r"""(?:\\*['"])?(?:admin_)?api_key(?:\\*['"])?\s*[:=]\s*(?P<open>\\*['"])""")
_BOUNDARY = re.compile(r"""\s*(?:[,})\]]|$)""", re.MULTILINE)
PATTERNS = [
    re.compile(r"""((?:admin_)?api_key=)([^'"\\,\s)][^,\s)]*)"""),  # unquoted: api_key=VALUE
    re.compile(r"""(--(?:admin-)?api-key[=\s]+)(\S+)"""),
]
# How a repr or JSON writes a string inside quotes; applied up to three times over (a repr inside JSON inside a
# repr, and every other order), so each escaped spelling of the key is replaced whole.
_ESCAPES = (
    lambda text: _py_escape(text, "'"),
    lambda text: _py_escape(text, '"'),
    lambda text: json.dumps(text)[1:-1],
    lambda text: json.dumps(text, ensure_ascii=False)[1:-1],
)
_LEVELS = 3


def _py_escape(text, quote):
    """TEXT as repr() writes it between QUOTE characters (repr picks the quote; a log may hold either)."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == quote:
            out.append("\\" + quote)
        elif char in "'\"":
            out.append(char)
        else:
            out.append(repr(char)[1:-1])
    return "".join(out)


def _spellings(key):
    """The key as written and as every combination of up to three repr/JSON escapings writes it, longest first."""
    found, level = {key}, {key}
    for _level in range(_LEVELS):
        level = {escape(text) for text in level for escape in _ESCAPES} - found
        found |= level
    return sorted(found, key=len, reverse=True)


def _redact_fields(text):
    """Every quoted value of a key field replaced by REDACTED, its quotes kept."""
    out, pos = [], 0
    while True:
        match = _FIELD.search(text, pos)
        if not match:
            break
        opener, start = match.group("open"), match.end()
        close = start
        while True:
            close = text.find(opener, close)
            if close < 0 or _BOUNDARY.match(text, close + len(opener)):
                break
            close += 1
        if close < 0:  # no end on this line: the rest of it goes
            close = text.find("\n", start)
            close = len(text) if close < 0 else close
            out.append(text[pos:start] + REDACTED)
            pos = close
            continue
        out.append(text[pos:start] + REDACTED + opener)
        pos = close + len(opener)
    out.append(text[pos:])
    return "".join(out)


def redact(text, keys):
    for key in keys:
        for spelling in _spellings(key) if key else ():
            text = text.replace(spelling, REDACTED)
    text = _redact_fields(text)
    for pattern in PATTERNS:
        text = pattern.sub(lambda match: match.group(1) + REDACTED, text)
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
