# -*- coding: utf-8 -*-
"""The fingerprint of what an SGLang server runs, read in one pass on its host.

For each path, in order: its content's SHA-1 when it is a regular file (not followed when it is a symlink), else
"-"; then, for each path, its symlink target when it is a symlink, else "-"; then the extra values (the GPU driver).
Joined by "," and hashed with SHA-256. These are the values a loop of ansible.builtin.stat (get_checksum, follow off)
gave, so a host keeps its recorded fingerprint across the change from that loop to this module.

A secret file (the API key's options) is not hashed plainly: the fingerprint is recorded world-readable and printed
in Ansible's output, and a plain hash of a weak key can be guessed offline. Its part is an HMAC-SHA256 keyed with the
host's salt, a random value in a root-only file that only root (who can read the key anyway) can read.
"""
from __future__ import annotations

import hashlib
import hmac
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


def fingerprint(paths, extra, keyed=(), salt=None):
    """SHA-256 hex of the described paths and the extra values; the paths in KEYED (secret files) are keyed with
    SALT."""
    if keyed and salt is None:
        raise SaltError("keyed paths need a salt")
    described = [describe(path, salt if path in keyed else None) for path in paths]
    # A link target is the file system's bytes (os.readlink escapes bytes that are not UTF-8 as lone surrogates):
    # os.fsencode gives them back exactly; UTF-8 text encodes as before.
    parts = ([pair[0].encode("ascii") for pair in described] + [os.fsencode(pair[1]) for pair in described]
             + [str(value).encode("utf-8") for value in extra])
    return hashlib.sha256(b",".join(parts)).hexdigest()


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


def read_recorded(path):
    """The fingerprint recorded in path (its text, stripped), or None when there is no such file."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None


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
