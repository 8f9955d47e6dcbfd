# -*- coding: utf-8 -*-
"""What an SGLang server runs, saved and put back on its host (the benchmark gate's known-good state).

``save(folder, files, link, hold=None)`` copies each file (absent ones are recorded as absent), notes where the
``current`` symlink points and whether that venv carries the fusion patch, and replaces FOLDER as a whole (a new
folder, then a rename): an interrupted save leaves the previous state intact. With HOLD it also writes
``<venv>/.sglang-keep/HOLD.json`` naming FOLDER/state.json, so sglang_venv_prune keeps that venv while the state
still names it.
``restore(folder, check)`` puts every file back (atomically, one by one, owner and mode included; files absent at
save time are removed) and points the link back; the fusion patch state is the caller's (sglang_fusion_patch).
Nothing is touched when the saved venv is gone. Standard library plus atomic_files only.

Symlinks: a file to save that is a symlink is refused, naming it (a saved state holds files; a restore would put
a regular file in the link's place). A restore writes each file's new content with its owner and mode already
set and renames it in, so a link found in a file's place since is replaced, never written through, and no mode
or owner reaches a link's target. The hold is written into the saved venv through no symlink below it.
"""
from __future__ import annotations

import datetime
import glob
import json
import os
import shutil
import tempfile

from ansible.module_utils import atomic_files
from ansible.module_utils.fusion_patcher import STATE_DIR_NAME
from ansible.module_utils.venv_prune import KEEP_DIR

STATE_FILE = "state.json"
PATCH_STATE = os.path.join(STATE_DIR_NAME, STATE_FILE)


class StateError(Exception):
    """A state that cannot be saved or restored; nothing was changed."""


def expand(files, globs):
    """FILES then every match of GLOBS (sorted), each once, in that order."""
    paths = list(files or [])
    for pattern in globs or []:
        paths += sorted(glob.glob(pattern))
    return list(dict.fromkeys(paths))


def _meta(path):
    stat = os.stat(path)
    return {"sha256": atomic_files.sha256_file(path), "mode": stat.st_mode & 0o7777,
            "uid": stat.st_uid, "gid": stat.st_gid}


def link_record(link):
    """{path, target, patched} for the symlink LINK, or None without one."""
    if not link:
        return None
    target = os.path.realpath(link)
    return {"path": link, "target": target, "patched": os.path.exists(os.path.join(target, PATCH_STATE))}


def load(folder):
    """The saved state of FOLDER, or None when nothing was saved there."""
    path = os.path.join(folder, STATE_FILE)
    try:  # a regular file only: a link in its place is not followed, a FIFO not opened (it would hang the run)
        text = atomic_files.read_record(path)
    except atomic_files.RecordError as exc:
        raise StateError(str(exc))
    if text is None:
        return None
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise StateError("%s is not a saved state: %s" % (path, exc))
    if not isinstance(state, dict) or not isinstance(state.get("files"), dict):
        raise StateError("%s is not a saved state (no files)" % path)
    return state


def query(folder):
    """{changed, exists, saved_at, link}: whether FOLDER holds a saved state, and which (nothing is touched)."""
    state = load(folder)
    if state is None:
        return {"changed": False, "exists": False, "saved_at": None, "link": None}
    return {"changed": False, "exists": True, "saved_at": state.get("saved_at"), "link": state.get("link")}


def same(old, files, link):
    """Whether the saved state OLD already is what a save of FILES and LINK would write."""
    if old is None or sorted(old["files"]) != sorted(files):
        return False
    for path, meta in old["files"].items():
        if (meta is None) != (not os.path.isfile(path)):
            return False
        if meta is not None:
            now = _meta(path)
            if any(now[key] != meta.get(key) for key in ("sha256", "mode", "uid", "gid")):
                return False
    return old.get("link") == link_record(link)


def hold_path(folder, name):
    """(the hold file in the saved venv, its content) for a hold NAME on the state in FOLDER, or (None, None)."""
    link = (load(folder) or {}).get("link")
    if not link:
        return None, None
    content = json.dumps({"state": os.path.join(os.path.abspath(folder), STATE_FILE)}) + "\n"
    return os.path.join(link["target"], KEEP_DIR, name + ".json"), content


def hold(folder, name, check=False):
    """Mark the saved venv as held by this state. True when the mark was (or would be) (re)written."""
    path, content = hold_path(folder, name)
    if path is None:
        return False
    venv = os.path.dirname(os.path.dirname(path))
    problem = atomic_files.link_problem(venv, path)
    if problem:
        raise StateError("cannot hold the saved venv: %s" % problem)
    if os.path.isfile(path) and atomic_files.read_bytes(path).decode("utf-8", "replace") == content:
        return False
    if not check:
        if not os.path.lexists(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path), mode=0o755)
        try:
            atomic_files.write_atomic(path, content.encode("utf-8"), mode=0o644, root=venv)
        except atomic_files.TransactionError as exc:
            raise StateError("cannot hold the saved venv: %s" % exc)
    return True


def save(folder, files, link=None, hold_name=None, check=False, now=None):
    """{saved, link, changed}: FOLDER holds FILES and LINK afterwards (with CHECK: would hold)."""
    if not folder or not os.path.isabs(folder):
        raise StateError("the state folder must be an absolute path, got %r" % (folder,))
    for path in files:
        if not os.path.isabs(path):
            raise StateError("saved files must be absolute paths, got %r" % (path,))
        if os.path.islink(path):
            raise StateError("%s is a symlink (to %s): a saved state holds files, and a restore would put a regular "
                             "file in the link's place; save the file itself (%s); nothing was saved" % (
                                 path, os.readlink(path), os.path.realpath(path)))
    if link and not os.path.islink(link):
        raise StateError("%s is not a symlink: nothing to save it as" % link)
    if hold_name and link:  # before anything is saved: a state whose hold cannot be written is not saved either
        venv = os.path.realpath(link)
        problem = atomic_files.link_problem(venv, os.path.join(venv, KEEP_DIR, hold_name + ".json"))
        if problem:
            raise StateError("cannot hold the saved venv: %s; nothing was saved" % problem)
    old = load(folder)
    if same(old, files, link):
        result = {"saved": sorted(files), "link": old["link"], "changed": False}
    else:
        result = {"saved": sorted(files), "link": link_record(link), "changed": True}
        if not check:
            _write(folder, files, link, now)
    # A check of a changed state already reports a change (the hold follows the new state).
    if hold_name and not (check and result["changed"]) and hold(folder, hold_name, check):
        result["changed"] = True
    return result


def _write(folder, files, link, now):
    parent = os.path.dirname(os.path.abspath(folder))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".state-", dir=parent)
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).isoformat()
    state = {"saved_at": stamp, "files": {}, "link": link_record(link)}
    try:
        os.makedirs(os.path.join(work, "files"))
        for index, path in enumerate(files):
            if os.path.isfile(path):
                copy = "%03d-%s" % (index, os.path.basename(path))
                shutil.copy2(path, os.path.join(work, "files", copy))
                state["files"][path] = dict(_meta(path), copy=copy)
            else:
                state["files"][path] = None
        atomic_files.write_atomic(os.path.join(work, STATE_FILE),
                                  json.dumps(state, indent=1, sort_keys=True).encode("utf-8"), mode=0o600)
        old = folder + ".old"
        if os.path.exists(old):
            shutil.rmtree(old)
        if os.path.exists(folder):
            os.rename(folder, old)
        os.rename(work, folder)
        if os.path.exists(old):
            shutil.rmtree(old)
        atomic_files.fsync_dir(parent)
    finally:
        if os.path.exists(work):
            shutil.rmtree(work)


def plan_restore(folder):
    """(state, actions) a restore of FOLDER would take; raises StateError before anything is touched."""
    state = load(folder)
    if state is None:
        raise StateError("nothing saved in %s" % folder)
    link = state.get("link")
    if link and not os.path.isdir(link["target"]):
        raise StateError("the saved venv %s is gone: cannot point %s back to it" % (link["target"], link["path"]))
    actions = []
    for path, meta in sorted(state["files"].items()):
        if os.path.isdir(path) and not os.path.islink(path):
            raise StateError("%s is a folder where the saved state has %s: it is not a regular file, so nothing was "
                             "restored" % (path, "a file" if meta else "nothing"))
        if meta is None:
            if os.path.lexists(path):
                actions.append({"path": path, "action": "remove"})
            continue
        if not os.path.isfile(os.path.join(folder, "files", meta["copy"])):
            raise StateError("the saved copy of %s is missing from %s" % (path, folder))
        if not os.path.islink(path) and os.path.isfile(path) and atomic_files.sha256_file(path) == meta["sha256"]:
            continue
        actions.append({"path": path, "action": "restore"})
    if link and os.path.realpath(link["path"]) != link["target"]:
        actions.append({"path": link["path"], "action": "relink", "from": os.path.realpath(link["path"]),
                        "to": link["target"]})
    return state, actions


def restore(folder, check=False):
    """{changed, actions, link, saved_at}: the host runs the saved state again (with CHECK: what would differ)."""
    state, actions = plan_restore(folder)
    if not check:
        for action in actions:
            _apply(folder, state, action)
    return {"changed": bool(actions), "actions": actions, "link": state.get("link"), "saved_at": state["saved_at"]}


def _apply(folder, state, action):
    path = action["path"]
    if action["action"] == "remove":
        os.unlink(path)
    elif action["action"] == "restore":
        meta = state["files"][path]
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = atomic_files.read_bytes(os.path.join(folder, "files", meta["copy"]))
        # Owner and mode on the new file before its rename (not root: the file stays ours).
        owner = (meta["uid"], meta["gid"]) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
        atomic_files.write_atomic(path, data, attributes=(meta["mode"],) + owner)
    else:
        tmp = path + ".rollback-tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(action["to"], tmp)
        os.replace(tmp, path)
        atomic_files.fsync_dir(os.path.dirname(path))
