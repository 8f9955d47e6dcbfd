# -*- coding: utf-8 -*-
"""The benchmark gate's recorded verdict per host, and whether a deploy must measure again.

A verdict is kept on the host next to the fingerprint sglang_server records at every proven start (what the server
runs: unit, environment files, venv, fusion patch, GPU driver). The gate measures a host again only when that
fingerprint or the gate's own settings differ from the verdict's, when the verdict failed, when none is recorded, or
when asked; otherwise the verdict stands and nothing is measured. A recorded verdict holds only with its fields of
the right kinds (``passed`` a JSON boolean: ``"false"`` is not a pass; ``version`` an integer, not ``true``), and
nothing written holds a NaN or infinite number.
"""
from __future__ import annotations

import hashlib
import json

VERSION = 1
# What a recorded verdict must hold to be trusted (anything else is measured again).
REQUIRED = ("version", "fingerprint", "settings_digest", "passed", "at")
KINDS = {"fingerprint": (str, "a string"), "settings_digest": (str, "a string"), "passed": (bool, "true or false"),
         "at": (str, "a string")}


class VerdictError(Exception):
    """An input the verdict cannot be read or written from."""


def settings_digest(settings):
    """A stable digest of the gate's settings (key order and whitespace do not matter)."""
    if not isinstance(settings, dict):
        raise VerdictError("settings must be a mapping, got %s" % type(settings).__name__)
    try:
        text = json.dumps(settings, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise VerdictError("settings cannot be written as JSON (a NaN or infinite number is not a setting): %s" % exc)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse(text):
    """(verdict, problem): the recorded verdict, or None with why it cannot be used (None, None: none recorded)."""
    if text is None:
        return None, None
    try:
        verdict = json.loads(text)
    except ValueError as exc:
        return None, "the recorded verdict is not JSON (%s)" % exc
    if not isinstance(verdict, dict) or any(key not in verdict for key in REQUIRED):
        return None, "the recorded verdict lacks %s" % ", ".join(k for k in REQUIRED if not isinstance(verdict, dict)
                                                                 or k not in verdict)
    if isinstance(verdict["version"], bool) or verdict["version"] != VERSION:
        return None, "the recorded verdict has version %r (this gate writes %d)" % (verdict["version"], VERSION)
    for key, (kind, what) in sorted(KINDS.items()):
        if not isinstance(verdict[key], kind):
            shown = repr(verdict[key])
            return None, "the recorded verdict's %s is %s, not %s" % (
                key, shown if len(shown) <= 40 else shown[:37] + "...", what)
    return verdict, None


def fingerprint_of(text):
    """The server's recorded fingerprint (first line of its record), or None when there is none."""
    if text is None:
        return None
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    return line or None


def decide(verdict, problem, fingerprint, digest, force):
    """(measure, reason): whether this host must be measured, and why (or why its verdict still holds)."""
    if force:
        return True, "forced (sglang_benchmark_force, or the gate run by itself)"
    if fingerprint is None:
        return True, "no proven server start is recorded on the host"
    if verdict is None:
        return True, problem or "no verdict recorded yet"
    at = verdict["at"]
    if verdict["fingerprint"] != fingerprint:
        return True, "what the server runs changed since the verdict of %s" % at
    if verdict["settings_digest"] != digest:
        return True, "the gate's settings or baseline changed since the verdict of %s" % at
    if not verdict["passed"]:
        return True, "the verdict of %s failed: judging again" % at
    return False, "the verdict of %s still holds: %s" % (at, verdict.get("summary") or "passed")


def record(fingerprint, digest, passed, at, summary, details):
    """The verdict to write (JSON text)."""
    if not fingerprint:
        raise VerdictError("no fingerprint to attach the verdict to (the server has no recorded proven start)")
    if not isinstance(details, dict):
        raise VerdictError("details must be a mapping, got %s" % type(details).__name__)
    if not isinstance(passed, bool):
        raise VerdictError("passed must be true or false, got %r" % (passed,))
    verdict = {"version": VERSION, "fingerprint": fingerprint, "settings_digest": digest, "passed": passed,
               "at": at, "summary": summary, "details": details}
    try:
        return json.dumps(verdict, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise VerdictError("details cannot be written as JSON (a NaN or infinite number is never recorded): %s"
                           % exc)
