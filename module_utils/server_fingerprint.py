# -*- coding: utf-8 -*-
"""The fingerprint of what an SGLang server runs, read in one pass on its host.

For each path, in order: its content's SHA-1 when it is a regular file (not followed when it is a symlink), else
"-"; then, for each path, its symlink target when it is a symlink, else "-"; then the extra values (the GPU driver).
Joined by "," and hashed with SHA-256. These are the values a loop of ansible.builtin.stat (get_checksum, follow off)
gave, so a host keeps its recorded fingerprint across the change from that loop to this module.
"""
from __future__ import annotations

import hashlib
import os
import stat


def _sha1(path):
    digest = hashlib.sha1()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe(path):
    """(checksum, link target) of one path, "-" for what it does not have; OSError other than absence propagates."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "-", "-"
    except NotADirectoryError:
        return "-", "-"
    if stat.S_ISLNK(info.st_mode):
        return "-", os.readlink(path)
    if stat.S_ISREG(info.st_mode):
        return _sha1(path), "-"
    return "-", "-"


def fingerprint(paths, extra):
    """SHA-256 hex of the described paths and the extra values."""
    described = [describe(path) for path in paths]
    parts = ([pair[0] for pair in described] + [pair[1] for pair in described]
             + [str(value) for value in extra])
    return hashlib.sha256(",".join(parts).encode("utf-8")).hexdigest()


def read_recorded(path):
    """The fingerprint recorded in path (its text, stripped), or None when there is no such file."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None
