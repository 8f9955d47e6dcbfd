# -*- coding: utf-8 -*-
"""The fingerprint of what an SGLang server runs, read in one pass on its host.

For each path, in order: its content's SHA-1 when it is a regular file (not followed when it is a symlink), else
"-"; then, for each path, its symlink target when it is a symlink, else "-"; then the extra values (the GPU driver).
Joined by "," and hashed with SHA-256. These are the values a loop of ansible.builtin.stat (get_checksum, follow off)
gave, so a host keeps its recorded fingerprint across the change from that loop to this module.

A secret file (the API key's options) is not hashed plainly: the fingerprint is recorded world-readable and printed
in Ansible's output, and a plain hash of a weak key can be guessed offline. Its part is an HMAC-SHA256 keyed with the
host's salt, a random value in a root-only file that only root (who can read the key anyway) can read.

Per input (each path, each extra value) the same parts are also returned as one digest each, under a name the
caller gives (``unit``, ``nccl env``, ...): a file's SHA-1 (``sha1:...``, its salted HMAC for a secret file), a
symlink's target (``link:...``), ``-`` for what is neither, an extra value as it is. They are recorded after the
fingerprint in ``.deployed-config`` (line 1 the fingerprint, as always: older readers and records go on working;
line 2 ``{"inputs": {name: digest}}``), so a later run names which inputs differ from the last proven start. They
say nothing the fingerprint does not: each is the very part the fingerprint hashes, and every other part of it is
readable on the host.

The restart decision (``restart_decision``) is the same function in a real run and a dry run: the fingerprint the
server would start with against the one recorded at its last proven start. A real run computes it after the
earlier roles wrote their files; a dry run, where nothing is written, passes what those roles would write
(``pending``: a content digest, a link target, a removal, or "changes" when the content is not known before the
write, as the fusion patch's record with its time stamp). A file put back to what the server started with is
therefore no restart in either: the running server read its environment files and options when it started, so
a tamper after that never reached it, and the repair leaves it running what was proven.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import stat

from ansible.module_utils import atomic_files

SALT_PATTERN = re.compile(r"[0-9a-f]{64}")


class SaltError(Exception):
    """A salt file that cannot be used; the message names it and the way out."""


def _hexdigest(path, digest):
    """DIGEST (a hashlib or hmac object) fed the file's content, as hex."""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe(path, salt=None):
    """(checksum, link target) of one path, "-" for what it does not have; OSError other than absence propagates.

    With SALT, a regular file's checksum is the salted HMAC of its content (a secret file)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "-", "-"
    except NotADirectoryError:
        return "-", "-"
    if stat.S_ISLNK(info.st_mode):
        return "-", os.readlink(path)
    if stat.S_ISREG(info.st_mode):
        if salt is None:
            return _hexdigest(path, hashlib.sha1()), "-"
        return "hmac-sha256:" + _hexdigest(path, hmac.new(salt, digestmod=hashlib.sha256)), "-"
    return "-", "-"


def describe_all(paths, keyed=(), salt=None):
    """[(checksum, link target)] of PATHS; the paths in KEYED (secret files) are keyed with SALT."""
    if keyed and salt is None:
        raise SaltError("keyed paths need a salt")
    return [describe(path, salt if path in keyed else None) for path in paths]


def fingerprint_of(described, extra):
    """SHA-256 hex of described paths (describe_all) and the extra values."""
    # A link target is the file system's bytes (os.readlink escapes bytes that are not UTF-8 as lone surrogates):
    # os.fsencode gives them back exactly; UTF-8 text encodes as before.
    parts = ([pair[0].encode("ascii") for pair in described] + [os.fsencode(pair[1]) for pair in described]
             + [str(value).encode("utf-8") for value in extra])
    return hashlib.sha256(b",".join(parts)).hexdigest()


def fingerprint(paths, extra, keyed=(), salt=None):
    """SHA-256 hex of the described paths and the extra values; the paths in KEYED (secret files) are keyed with
    SALT."""
    return fingerprint_of(describe_all(paths, keyed, salt), extra)


# What a dry run says an earlier role would write to a path (`pending`), besides content given as text.
PENDING_CHANGES = "changes"
PENDING_ABSENT = "absent"
_PENDING_SHA1 = re.compile(r"sha1:([0-9a-f]{40})")
# The part of a path whose new content is not known before the write: it matches no record.
UNKNOWN_CONTENT = "pending-change"


def pending_problems(paths, pending, pending_content=None):
    """One message per pending entry that is not one of the forms (sha1:<40 hex>, link:<target>, like:<absolute
    path>, absent, changes) or names a path twice."""
    found = []
    for path in sorted(pending):
        value = pending[path]
        if not isinstance(value, str) or not (
                _PENDING_SHA1.fullmatch(value) or value in (PENDING_ABSENT, PENDING_CHANGES)
                or value.startswith("link:") and len(value) > 5 or value.startswith("like:/")):
            found.append("pending[%s] must be sha1:<40 hex digits>, link:<target>, like:<absolute path>, %s or %s "
                         "(got %r)" % (path, PENDING_ABSENT, PENDING_CHANGES, value))
    for path in sorted(set(pending) & set(pending_content or {})):
        found.append("%s is in both pending and pending_content" % path)
    return found


def _content_part(content, salt):
    data = content.encode("utf-8")
    if salt is None:
        return hashlib.sha1(data).hexdigest()
    return "hmac-sha256:" + hmac.new(salt, data, digestmod=hashlib.sha256).hexdigest()


def apply_pending(paths, described, pending=None, pending_content=None, keyed=(), salt=None):
    """DESCRIBED (describe_all of PATHS) as it will be once this run's pending writes are made: PENDING maps a path
    to what it will hold (see pending_problems), PENDING_CONTENT to its new text (hashed as describe() hashes the
    file, keyed for a path in KEYED). Entries for paths that are not inputs change nothing."""
    pending, pending_content = pending or {}, pending_content or {}
    after = []
    for path, pair in zip(paths, described):
        if path in pending_content:
            pair = (_content_part(pending_content[path], salt if path in keyed else None), "-")
        elif path in pending:
            value = pending[path]
            if value == PENDING_ABSENT:
                pair = ("-", "-")
            elif value == PENDING_CHANGES:
                pair = (UNKNOWN_CONTENT, "-")
            elif value.startswith("sha1:"):
                pair = (value[5:], "-")
            elif value.startswith("link:"):
                pair = ("-", value[5:])
            else:  # like:<path>: what that other path holds now (the venv `current` would point to)
                pair = describe(value[5:], salt if path in keyed else None)
        after.append(pair)
    return after


def input_digests(names, described, extra):
    """{name: digest} of every input, in order: the paths' (described) then the extra values. A file's digest is
    "sha1:<hex>" (or its "hmac-sha256:<hex>"), a symlink's "link:<target>", anything else "-"."""
    digests = {}
    values = []
    for checksum, target in described:
        if checksum != "-":
            values.append(checksum if ":" in checksum or checksum == UNKNOWN_CONTENT else "sha1:" + checksum)
        elif target != "-":
            values.append("link:" + os.fsencode(target).decode("utf-8", "backslashreplace"))
        else:
            values.append("-")
    values += [str(value) for value in extra]
    for name, value in zip(names, values):
        digests[name] = value
    return digests


def default_names(paths, extra):
    """The names of the inputs when the caller gives none: each path, then extra[<n>]."""
    return list(paths) + ["extra[%d]" % index for index in range(len(extra))]


def name_problems(names, paths, extra):
    """Messages when NAMES does not name every input once (paths then extra values)."""
    found = []
    if len(names) != len(paths) + len(extra):
        found.append("names must name every path and extra value, in order: %d path(s) and %d extra value(s), "
                     "%d name(s)" % (len(paths), len(extra), len(names)))
    doubled = sorted(name for name in set(names) if names.count(name) > 1)
    if doubled:
        found.append("names must differ; given more than once: %s" % ", ".join(doubled))
    return found


def render_record(value, inputs):
    """The text of .deployed-config: the fingerprint on line 1 (what every reader reads), the inputs on line 2."""
    return "%s\n%s\n" % (value, json.dumps({"inputs": inputs}, sort_keys=True, ensure_ascii=True))


def parse_record(text):
    """(fingerprint, inputs or None) of a record's TEXT (None, None for no record). A record written before the
    inputs were recorded, or whose second line is not theirs, has inputs None: which input changed is unknown."""
    if text is None:
        return None, None
    lines = text.strip().splitlines()
    if not lines:
        return "", None
    inputs = None
    if len(lines) > 1:
        try:
            data = json.loads(lines[1])
        except ValueError:
            data = None
        candidate = data.get("inputs") if isinstance(data, dict) else None
        if isinstance(candidate, dict) and all(isinstance(key, str) and isinstance(item, str)
                                               for key, item in candidate.items()):
            inputs = candidate
    return lines[0].strip(), inputs


def changed_inputs(inputs, recorded_inputs):
    """The names whose digest differs from the record's (inputs added or gone included), in INPUTS' order, then
    those only the record has; None when the record has no inputs (unknown which)."""
    if recorded_inputs is None:
        return None
    names = [name for name in inputs if recorded_inputs.get(name) != inputs[name]]
    return names + [name for name in recorded_inputs if name not in inputs]


def restart_decision(value, recorded, inputs, recorded_inputs, active_state="active", rewritten=()):
    """{restart, changed_inputs, reasons}: whether the server must restart to run VALUE (the fingerprint it would
    start with) and why, in words. RECORDED: the fingerprint of the last proven start (None: never proven);
    REWRITTEN: names of inputs this run rewrites that restart even when their content ends up as recorded (the
    unit: systemd must load it again)."""
    reasons = []
    names = changed_inputs(inputs, recorded_inputs)
    if recorded is None:
        reasons.append("no proven start recorded")
    elif recorded != value:
        if names is None:
            reasons.append("its fingerprint changed (unknown which input: the record predates per-input digests)")
        elif names:
            reasons.append("changed: " + ", ".join(names))
        else:
            reasons.append("its fingerprint changed")
    else:
        names = []  # the same fingerprint: nothing the server runs changed (whatever names a record used)
    for name in rewritten:
        if not names or name not in names:
            reasons.append("%s rewritten" % name)
    if active_state != "active":
        reasons.append("not active (%s)" % active_state)
    return {"restart": bool(reasons), "changed_inputs": names, "reasons": reasons}


def input_problems(extra):
    """One message per extra value that is not text (a lone surrogate, which JSON can carry and UTF-8 cannot
    hold); fingerprint() would fail on it."""
    found = []
    for index, value in enumerate(extra):
        text = str(value)
        bad = [ch for ch in text if 0xD800 <= ord(ch) <= 0xDFFF]
        if bad:
            shown = repr(text) if len(repr(text)) <= 80 else repr(text)[:77] + "..."
            found.append("extra[%d] holds a lone surrogate (U+%04X): it is not text and cannot be fingerprinted "
                         "(got %s)" % (index, ord(bad[0]), shown))
    return found


def read_record(path):
    """The text of the record in PATH, or None when there is no such file."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def read_recorded(path):
    """The fingerprint recorded in PATH (its first line, stripped), or None when there is no such file."""
    return parse_record(read_record(path))[0]


def read_salt(path):
    """The salt in PATH (bytes), or None when there is none. Refused unless a regular file of this user that nobody
    else can read, holding 64 hex digits: a salt others can read protects nothing."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    way_out = "remove it and the next run makes a new one (servers with an API key then restart once)"
    if not stat.S_ISREG(info.st_mode):
        raise SaltError("%s is not a regular file; %s" % (path, way_out))
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise SaltError("%s must belong to uid %d with mode 0600 (it is uid %d, mode %04o); %s"
                        % (path, os.geteuid(), info.st_uid, info.st_mode & 0o7777, way_out))
    with open(path, "r", encoding="ascii", errors="replace") as handle:
        text = handle.read().strip()
    if not SALT_PATTERN.fullmatch(text):
        raise SaltError("%s does not hold 64 hex digits; %s" % (path, way_out))
    return text.encode("ascii")


def new_salt():
    """A fresh salt (bytes), as make_salt writes it."""
    return secrets.token_hex(32).encode("ascii")


def make_salt(path):
    """Write a fresh salt to PATH atomically, mode 0600, and return it; the directory must exist."""
    salt = new_salt()
    try:
        atomic_files.write_atomic(path, salt + b"\n", mode=0o600)
    except OSError as exc:
        raise SaltError("cannot write %s: %s" % (path, exc.strerror or exc))
    return salt
