# -*- coding: utf-8 -*-
"""Check every value that reaches a systemd unit, an EnvironmentFile or a venv start-up hook.

Pure logic, no I/O. Each check returns a list of messages, empty when the value is safe; each message names
the variable and the rule it breaks, so an operator can fix the setting without reading code. The rules follow
what systemd does with the text it reads (systemd.service "Command lines", systemd.unit "Specifiers",
systemd.exec "EnvironmentFile="):
  * a newline ends a directive, so one in a value adds a directive (e.g. ``ExecStartPre=+...`` runs as root);
  * whitespace splits an ExecStart argument in two; quotes and backslashes are unquoted;
  * ``%x`` is a specifier and ``$VAR``/``${VAR}`` is expanded in ExecStart;
  * a lone ``;`` separated commands in older systemd releases.
Nothing is escaped here: a value that would need escaping is refused, because no deployment needs one.
"""
from __future__ import annotations

import keyword
import os
import re

# Characters systemd gives a meaning in ExecStart arguments or EnvironmentFile values.
UNIT_SPECIAL = {
    "%": "a systemd specifier (%)",
    "$": "an environment expansion ($)",
    '"': "a quote",
    "'": "a quote",
    "\\": "a backslash (an escape)",
    "`": "a backquote",
}
# Matched whole (fullmatch): '$' would also match before a final newline, letting "name\n" through.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")
_HOST = re.compile(r"[A-Za-z0-9.:_-]+")
_DIGITS = re.compile(r"-?[0-9]+")
_ENV_NAME = _IDENTIFIER
# More digits than any port, size or count needs.
_MAX_DIGITS = 18


def _show(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _control(name, text):
    """Control characters (newline, carriage return, tab, NUL, DEL, C1), and lone surrogates: a str can hold one
    (from JSON's "\\udc80"), no UTF-8 file can (systemd refuses an EnvironmentFile line of invalid UTF-8)."""
    for ch in text:
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return ["%s holds a lone surrogate (U+%04X): it is not text, and no file can hold it as UTF-8 (got %s)"
                    % (name, ord(ch), _show(text))]
        if ord(ch) < 32 or 127 <= ord(ch) < 160 or ch in "\u2028\u2029":
            what = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL byte"}.get(
                ch, "a control character (U+%04X)" % ord(ch))
            return ["%s holds %s: a line break or control character would end or corrupt the line it is written "
                    "on (got %s)" % (name, what, _show(text))]
    return []


def _specials(name, text, where):
    found = sorted(set(UNIT_SPECIAL[ch] for ch in text if ch in UNIT_SPECIAL))
    if found:
        return ["%s holds %s: %s would expand or unquote it (got %s)" % (name, ", ".join(found), where, _show(text))]
    return []


def _string(name, value):
    if not isinstance(value, str):
        return ["%s must be a string (got %s %s)" % (name, type(value).__name__, _show(value))]
    if value == "":
        return ["%s is empty" % name]
    return []


def word(name, value):
    """One ExecStart argument: no control characters, no whitespace, nothing systemd expands or unquotes."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if re.search(r"\s", value):
        return ["%s holds whitespace: systemd would split it into several arguments (got %s)" % (name, _show(value))]
    if value == ";":
        return ["%s is a lone ';', which systemd reads as a command separator" % name]
    return _specials(name, value, "systemd")


def text(name, value):
    """Free text on one unit line (Description=): spaces allowed, no control characters, no specifiers."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if "%" in value:
        return ["%s holds a systemd specifier (%%): systemd would expand it (got %s)" % (name, _show(value))]
    return []


def comment(name, value):
    """Text written as a comment line: anything printable; a line break would end the comment early, and a
    trailing backslash continues it onto the next line for systemd before v254 (which then drops that setting)."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if value.endswith("\\"):
        return ["%s ends in a backslash: systemd before v254 would read the next line as part of the comment "
                "(got %s)" % (name, _show(value))]
    return []


def line(name, value):
    """One line of text the writer quotes itself (a shell word through ``quote``, a JSON string): spaces, quotes and
    ``$`` are the quoting's business; a line break or control character is not, since a line-based reader (a
    comment, a log line, pip's requirements) would take what follows for a line of its own."""
    return _string(name, value) or _control(name, value)


def url(name, value):
    """One word a line-based config or an argument list carries (an index URL in pip's config): no whitespace, no
    control character. '%' and '$' are the reader's (pip's config does not interpolate)."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if re.search(r"\s", value):
        return ["%s holds whitespace: it would be read as two values (got %s)" % (name, _show(value))]
    return []


def requirement(name, value):
    """One line of a pip requirements file naming a package (ansible-core==2.19.14): no line break, and not an
    option (a line beginning with '-' is one to pip: --index-url, -r FILE, -e URL)."""
    errors = line(name, value)
    if errors:
        return errors
    if value.lstrip().startswith("-"):
        return ["%s begins with '-': pip would read the line as an option, not a package (got %s)"
                % (name, _show(value))]
    return []


# An exact pin as sglang_install's preflight admits it: name[extras]==version, an optional marker, an optional
# continuation; or a --hash line, a comment, a blank line.
_PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]*\])?==[^\s;\\]+(\s*;[^\\]*)?(\s*\\)?")


def requirements(name, value):
    """A whole exact-pin requirements file (a lock): every line blank, a comment, a --hash line or an exact pin;
    no other pip option (an index URL, -r, -e) and no control character but the line breaks."""
    errors = _string(name, value)
    if errors:
        return errors
    for number, text in enumerate(value.split("\n"), 1):
        label = "%s line %d" % (name, number)
        errors = _control(label, text.rstrip("\r")) if text else []
        if errors:
            return errors
        stripped = text.strip()
        if stripped == "" or stripped.startswith("#") or stripped.startswith("--hash="):
            continue
        if not _PIN.fullmatch(stripped):
            return ["%s is not an exact pin (name==version), a --hash line or a comment (got %s)"
                    % (label, _show(text))]
    return []


def path(name, value, under=None):
    """An absolute, normalized path (no '..', '.', '//', trailing '/'), safe as one argument; optionally under a
    directory."""
    errors = word(name, value)
    if errors:
        return errors
    if not value.startswith("/"):
        return ["%s must be an absolute path (got %s)" % (name, _show(value))]
    if os.path.normpath(value) != value or value.startswith("//"):
        return ["%s must be a normalized path, without '..', '.', '//' or a trailing '/' (got %s; normalized: %s)"
                % (name, _show(value), os.path.normpath(value))]
    if under is not None:
        base = os.path.normpath(under)
        if value == base or not value.startswith(base.rstrip("/") + "/"):
            return ["%s must be a path inside %s (got %s)" % (name, base, _show(value))]
    return []


def identifier(name, value):
    """A Python module name: letters, digits and '_', not starting with a digit (no dots, no paths)."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if not _IDENTIFIER.fullmatch(value):
        return ["%s must be a Python identifier (letters, digits, '_'; no dots, slashes or spaces) (got %s)"
                % (name, _show(value))]
    if keyword.iskeyword(value):
        return ["%s is a Python keyword, which cannot be imported as a module (got %s)" % (name, _show(value))]
    return []


def unit_name(name, value):
    """A unit or service name without suffix: letters, digits, '_', '.', '@', '-'."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if not _UNIT_NAME.fullmatch(value):
        return ["%s must be a plain unit name (letters, digits, '_', '.', '@', '-') (got %s)" % (name, _show(value))]
    return []


def host(name, value):
    """A listen or rendezvous address: a host name or an IPv4/IPv6 address, nothing else."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if not _HOST.fullmatch(value):
        return ["%s must be a host name or an IP address (letters, digits, '.', ':', '-', '_') (got %s)"
                % (name, _show(value))]
    return []


def integer(name, value, low=None, high=None):
    """A decimal integer (bool is not one), optionally bounded."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return ["%s must be an integer (got %s %s)" % (name, type(value).__name__, _show(value))]
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        return ["%s must be a decimal integer (got %s)" % (name, _show(value))]
    # Compared before int()/repr(): Python refuses to convert thousands of digits, with its own error.
    if len(value.lstrip("-")) > _MAX_DIGITS if isinstance(value, str) else abs(value) >= 10 ** _MAX_DIGITS:
        return ["%s has more than %d digits" % (name, _MAX_DIGITS)]
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        # A signed number is an integer all the same: the rule it breaks is its range.
        kind = {0: "a non-negative integer, ", 1: "a positive integer, "}.get(low, "")
        return ["%s must be %sfrom %s to %s (got %s)"
                % (name, kind, low if low is not None else "-inf", high if high is not None else "inf", number)]
    return []


def env_value(name, value):
    """A value in an EnvironmentFile (and the matching start-up hook): one word, no quoting or expansion needed,
    so the file and the hook hold exactly the same string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if re.search(r"\s", value):
        return ["%s holds whitespace: the EnvironmentFile would need quoting and the start-up hook would get a "
                "different string (got %s)" % (name, _show(value))]
    return _specials(name, value, "the EnvironmentFile parser")


def env_name(name, value):
    """An environment variable name."""
    errors = _string(name, value) or _control(name, value)
    if errors:
        return errors
    if not _ENV_NAME.fullmatch(value):
        return ["%s is not an environment variable name (letters, digits, '_') (got %s)" % (name, _show(value))]
    return []


CHECKS = {
    "word": word, "text": text, "comment": comment, "line": line, "url": url, "requirement": requirement,
    "requirements": requirements, "path": path, "identifier": identifier,
    "unit_name": unit_name, "host": host, "integer": integer, "env_value": env_value, "env_name": env_name,
}


def refusal(context, errors):
    """The one failure message of a refused check (the module and the controller-side action plugin use it)."""
    return "%s refused, nothing written: %s" % (context, "; ".join(errors))


def _hidden(error):
    """A message without the value it quotes: '(got ...)' and what follows go."""
    return re.sub(r" \(got .*$", " (the value is not shown: it may hold a secret)", error, flags=re.S)


def check_all(values):
    """``values``: {variable: {"value": ..., "kind": ..., "under": ..., "low": ..., "high": ..., "items": bool,
    "optional": bool, "secret": bool}}.

    ``items`` checks every element of a list value, naming each one ``variable[i]``; ``secret`` leaves the value
    out of the messages (an index URL may carry a token). Returns all messages.
    """
    errors = []
    for name in sorted(values):
        spec = values[name]
        if not isinstance(spec, dict) or not isinstance(spec.get("kind"), str) or spec["kind"] not in CHECKS:
            errors.append("%s: no known check (kind is one of %s)" % (name, ", ".join(sorted(CHECKS))))
            continue
        bounds = [spec.get(key) for key in ("low", "high")]
        if not isinstance(spec.get("under") or "", str) or any(
                isinstance(bound, bool) or not isinstance(bound, (int, type(None))) for bound in bounds):
            errors.append("%s: its check's 'under' must be a path and 'low'/'high' integers (got %s)"
                          % (name, _show({key: spec.get(key) for key in ("under", "low", "high")})))
            continue
        check = CHECKS[spec["kind"]]
        extra = {}
        if spec["kind"] == "path" and spec.get("under"):
            extra["under"] = spec["under"]
        if spec["kind"] == "integer":
            extra = {"low": spec.get("low"), "high": spec.get("high")}
        value = spec.get("value")
        found = []
        if spec.get("items"):
            if not isinstance(value, list):
                errors.append("%s must be a list (got %s)" % (name, type(value).__name__))
                continue
            for index, item in enumerate(value):
                found += check("%s[%d]" % (name, index), item, **extra)
        elif spec.get("optional") and value in ("", None):
            continue
        else:
            found += check(name, value, **extra)
        errors += [_hidden(error) for error in found] if spec.get("secret") else found
    return errors
