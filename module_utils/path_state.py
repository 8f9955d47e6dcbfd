# -*- coding: utf-8 -*-
"""Directories with an owner, a group and a mode, and files that must be gone: planned, then applied.

What ansible.builtin.file does for state=directory and state=absent, for a whole list in one module run: a no-op
deploy checks every directory of the host layout (sglang_layout) at the cost of one Python start-up on the host
instead of one per path. Planning reads only (check mode stops there); applying makes each change in the order
planned. Names are resolved on the host (pwd/grp), as the file module does.

Unlike ansible.builtin.file, a symlink where a directory is managed is refused, naming it: an owner or mode set
through it would land on its target (a link the service user plants in a directory it owns would make root hand
it any directory). Owners and modes are set on a descriptor opened without following a link, so a directory
swapped for one between the plan and the change is refused too, and its target never changes.
"""
from __future__ import annotations

import grp
import os
import pwd
import stat

from ansible.module_utils import atomic_files
from ansible.module_utils import root_trust


class PathError(Exception):
    """A request that cannot be carried out; the message names the path and why."""


def parse_mode(path, mode):
    """An octal mode string ('0750', '750') or an int -> int; anything else is refused."""
    if isinstance(mode, int) and not isinstance(mode, bool):
        value = mode
    elif isinstance(mode, str) and mode and all(ch in "01234567" for ch in mode) and len(mode) <= 4:
        value = int(mode, 8)
    else:
        raise PathError("%s: mode must be an octal string such as '0750' (got %r)" % (path, mode))
    if not 0 <= value <= 0o7777:
        raise PathError("%s: mode %o is out of range" % (path, value))
    return value


def _check_path(path):
    if not isinstance(path, str) or not path.startswith("/") or os.path.normpath(path) != path or path == "/":
        raise PathError("path must be absolute and normalized, and not / (got %r)" % (path,))
    problem = root_trust.planted_link_problem(path) if os.geteuid() == 0 else None
    if problem:
        raise PathError("%s; nothing was changed" % problem)


def owner_ids(owner, group):
    """(uid, gid) of an owner and a group name, None for a name the host does not know (yet)."""
    try:
        uid = pwd.getpwnam(owner).pw_uid
    except KeyError:
        uid = None
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        gid = None
    return uid, gid


def _ids(entry):
    return owner_ids(entry["owner"], entry["group"])


def plan(directories, absent):
    """[(path, action, detail)] for what differs; action is create, owner, mode or remove.

    directories: [{path, owner, group, mode}]; absent: [path]. Raises PathError before anything could be changed.
    """
    changes = []
    wanted = []
    for entry in directories:
        if not isinstance(entry, dict) or set(entry) != {"path", "owner", "group", "mode"}:
            raise PathError("each directory needs exactly path, owner, group and mode (got %r)" % (entry,))
        _check_path(entry["path"])
        wanted.append(dict(entry, mode=parse_mode(entry["path"], entry["mode"])))
    for path in absent:
        _check_path(path)
    for entry in wanted:
        path, mode = entry["path"], entry["mode"]
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            changes.append((path, "create", "%s:%s %04o" % (entry["owner"], entry["group"], mode)))
            continue
        if stat.S_ISLNK(found.st_mode):
            raise PathError("%s is a symlink (to %s): no owner or mode is set through a link (its target's would "
                            "change); point the layout variable at the real directory (%s), or replace the link with "
                            "a directory" % (path, os.readlink(path), os.path.realpath(path)))
        if not stat.S_ISDIR(found.st_mode):
            raise PathError("%s exists and is not a directory" % path)
        uid, gid = _ids(entry)
        if (uid, gid) != (found.st_uid, found.st_gid):
            detail = "%d:%d -> %s:%s" % (found.st_uid, found.st_gid, entry["owner"], entry["group"])
            changes.append((path, "owner", detail))
        if stat.S_IMODE(found.st_mode) != mode:
            changes.append((path, "mode", "%04o -> %04o" % (stat.S_IMODE(found.st_mode), mode)))
    for path in absent:
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(found.st_mode):
            raise PathError("%s is a directory; only files and symlinks are removed here" % path)
        changes.append((path, "remove", "file" if stat.S_ISREG(found.st_mode) else "symlink or special file"))
    return changes, wanted


def apply(changes, wanted):
    """Make the planned changes; names that are still unknown fail here, naming the path."""
    try:
        _apply(changes, wanted)
    except atomic_files.TransactionError as exc:  # a link in a directory's place, found while changing it
        raise PathError(str(exc))


def _apply(changes, wanted):
    by_path = dict((entry["path"], entry) for entry in wanted)
    for path, action, _detail in changes:
        if action == "remove":
            os.unlink(path)
            continue
        entry = by_path[path]
        uid, gid = _ids(entry)
        if uid is None or gid is None:
            raise PathError("%s: owner %s or group %s does not exist on this host"
                            % (path, entry["owner"], entry["group"]))
        if action == "create":
            parent = os.path.dirname(path)
            if not os.path.isdir(parent):
                os.makedirs(parent, 0o755)
            os.mkdir(path, 0o700)  # opened up below, after the owner is right
            atomic_files.set_owner_mode(path, entry["mode"], uid, gid, directory=True)
        elif action == "owner":
            # chown clears set-id bits; the mode is set again
            atomic_files.set_owner_mode(path, entry["mode"], uid, gid, directory=True)
        elif action == "mode":
            atomic_files.set_owner_mode(path, entry["mode"], directory=True)


def diff(changes):
    """Ansible diff entries: one line per change."""
    if not changes:
        return []
    return [{"before": "".join("%s: %s\n" % (path, "present" if action != "create" else "absent")
                               for path, action, _d in changes),
             "after": "".join("%s: %s %s\n" % (path, action, detail) for path, action, detail in changes)}]
