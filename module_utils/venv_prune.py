# -*- coding: utf-8 -*-
"""Which lock venvs under <root>/venvs can go, and removing them without leaving a half venv behind.

sglang_install gives every lock its own venv (<root>/venvs/<lock>-<sha>, marked complete by
``.sglang-install-complete``) and never reinstalls one, so venvs pile up: with the CUDA closure each holds
~10 GB. A venv stays when it is:
  - the one <root>/current points at (the server runs from it);
  - held by a saved state that may have to be restored (the benchmark gate's known-good state): a file in its
    ``.sglang-keep/`` names the state file, and the hold counts only while that state file still names this
    venv (a stale hold, from a state saved over since, holds nothing);
  - incomplete (an install in progress, or a failed one the next install of its lock replaces): not ours to judge;
  - one of the ``keep`` most recently installed complete venvs (the active one counts among them).
Everything else is removed: renamed to ``.removing-<name>`` first (one atomic step; nothing can start from it
after that), then deleted; a ``.removing-*`` left by an interrupted removal is deleted on the next run.
"""
from __future__ import annotations

import json
import os
import shutil

from ansible.module_utils import atomic_files

COMPLETE = ".sglang-install-complete"
KEEP_DIR = ".sglang-keep"
REMOVING = ".removing-"


def holds(venv):
    """(valid, stale): the saved states that hold this venv, and the hold files that no longer do."""
    valid, stale = [], []
    folder = os.path.join(venv, KEEP_DIR)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return valid, stale
    for name in names:
        path = os.path.join(folder, name)
        try:  # regular files only: a link is not followed, a FIFO not opened (it would hang the run)
            state_file = json.loads(atomic_files.read_record(path))["state"]
            target = (json.loads(atomic_files.read_record(state_file)).get("link") or {}).get("target")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, atomic_files.RecordError):
            stale.append(path)
            continue
        if target and os.path.realpath(target) == os.path.realpath(venv):
            valid.append(state_file)
        else:
            stale.append(path)
    return valid, stale


def root_problem(root):
    """Why ``root`` cannot hold venvs (a message), or None; a missing root holds nothing to prune."""
    if not os.path.isabs(root) or os.path.normpath(root) != root:
        return "root must be an absolute, normalized path (got %r)" % root
    if os.path.exists(root) and not os.path.isdir(root):
        return "root %s is not a directory; nothing was removed" % root
    venvs_dir = os.path.join(root, "venvs")
    if os.path.exists(venvs_dir) and not os.path.isdir(venvs_dir):
        return "%s is not a directory; nothing was removed" % venvs_dir
    return None


def scan(root):
    """{'current', 'venvs': [{name, path, installed (mtime of the complete marker or None), holds, stale}],
    'leftovers': [paths of interrupted removals]}."""
    venvs_dir = os.path.join(root, "venvs")
    link = os.path.join(root, "current")
    current = os.path.realpath(link) if os.path.islink(link) else None
    found = {"current": current, "venvs": [], "leftovers": []}
    try:
        names = sorted(os.listdir(venvs_dir))
    except FileNotFoundError:
        return found
    for name in names:
        path = os.path.join(venvs_dir, name)
        if name.startswith(REMOVING):
            found["leftovers"].append(path)
            continue
        if os.path.islink(path) or not os.path.isdir(path):
            continue
        marker = os.path.join(path, COMPLETE)
        valid, stale = holds(path)
        found["venvs"].append({"name": name, "path": path, "holds": valid, "stale": stale,
                               "installed": os.path.getmtime(marker) if os.path.isfile(marker) else None})
    return found


def with_active(found, active, dry_run=False):
    """``found`` as it will be once ``active`` (the venv this run's lock installs, which current then points at) is
    in place: a dry run before the install sees neither the venv nor the switch, and plans as after it. A real run
    has switched already; where current points elsewhere all the same, that venv stays too (a server may run it)."""
    if not active or os.path.realpath(active) == found["current"]:
        return found
    found = dict(found, venvs=list(found["venvs"]), pending=os.path.realpath(active))
    if dry_run:
        found["current"], found["pending"] = found["pending"], None
    if not any(os.path.realpath(venv["path"]) == found["pending"] for venv in found["venvs"]):
        found["venvs"].append({"name": os.path.basename(active.rstrip("/")), "path": active, "holds": [],
                               "stale": [], "installed": float("inf"), "not_yet": True})
    return found


def plan(found, keep):
    """(kept: {name: reason}, remove: [names]) for a scan() result; keep >= 1."""
    if keep < 1:
        raise ValueError("keep must be 1 or more (the active venv always stays)")
    kept = {}
    if found["current"] is None:
        # Nothing is known to be in use: remove nothing.
        return {v["name"]: "kept: %s/current is not a symlink, so nothing is known to be unused"
                % os.path.dirname(os.path.dirname(v["path"])) for v in found["venvs"]}, []
    for venv in found["venvs"]:
        if os.path.realpath(venv["path"]) == found["current"]:
            kept[venv["name"]] = "active (current points at it)"
        elif os.path.realpath(venv["path"]) == found.get("pending"):
            kept[venv["name"]] = "active after this deploy (current will point at it)"
        elif venv["holds"]:
            kept[venv["name"]] = "held by the saved state " + ", ".join(venv["holds"])
        elif venv["installed"] is None:
            kept[venv["name"]] = "incomplete (in progress, or failed: the next install of its lock replaces it)"
    complete = sorted((v for v in found["venvs"] if v["installed"] is not None),
                      key=lambda v: (-v["installed"], v["name"]))
    for venv in complete[:keep]:
        kept.setdefault(venv["name"], "one of the %d most recently installed" % keep)
    return kept, [v["name"] for v in found["venvs"] if v["name"] not in kept]


def disk_bytes(path):
    """Bytes on disk under path (symlinks not followed, PATH itself included)."""
    if os.path.islink(path):
        return 0
    total = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += stat.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total


def remove(path):
    """Rename path out of the way (atomic), then delete it. A crash leaves only a .removing-* folder.

    A symlink (a leftover named like one, or a venv swapped for a link) is removed itself: nothing it points to is
    entered or deleted."""
    parent, name = os.path.split(path)
    if os.path.islink(path):
        os.unlink(path)
        atomic_files.fsync_dir(parent)
        return
    if not name.startswith(REMOVING):
        moved = os.path.join(parent, "%s%s" % (REMOVING, name))
        if os.path.lexists(moved):
            shutil.rmtree(moved)
        os.rename(path, moved)
        atomic_files.fsync_dir(parent)
        path = moved
    shutil.rmtree(path)
