# -*- coding: utf-8 -*-
"""Whether root may execute or trust a path: it and every folder above it, up to ``/``, only root can change.

A path passes when each of its components (``lstat``, as given and again as ``realpath`` resolves it: a venv's
``bin/python`` is a link to the base interpreter) is owned by root and, unless it is a link, not writable by group
or others. A world-writable folder with the sticky bit (``/tmp``) passes only on the way to an entry root owns: no
other user can then rename or replace that entry. ``interpreter_problem`` also checks every entry of the venv the
interpreter belongs to (its site-packages are imported by root), so nothing the service user wrote runs with root's
rights or sees a token.
"""
from __future__ import annotations

import os
import stat


def _component_problem(path, info, uid, sticky_parent_ok):
    if info.st_uid != uid:
        return "%s is owned by uid %d, not %d" % (path, info.st_uid, uid)
    if stat.S_ISLNK(info.st_mode):
        return None
    if info.st_mode & 0o022 and not (sticky_parent_ok and info.st_mode & stat.S_ISVTX and stat.S_ISDIR(info.st_mode)):
        return "%s is writable by group or others (mode %04o)" % (path, stat.S_IMODE(info.st_mode))
    return None


def chain_paths(path):
    """``/`` and every folder on the way to PATH (made absolute, not resolved), PATH last."""
    paths = ["/"]
    for part in os.path.abspath(path).split("/"):
        if part:
            paths.append(os.path.join(paths[-1], part))
    return paths


def chain_problem(path, uid=0):
    """Why PATH or a folder above it is not root's alone (None when every one is), walked as given, no link
    followed."""
    paths = chain_paths(path)
    try:
        current = os.lstat("/")
    except OSError as exc:
        return "/ cannot be examined: %s" % exc.strerror
    for index, shown in enumerate(paths):
        nxt = None
        if index + 1 < len(paths):
            child = paths[index + 1]
            try:
                nxt = os.lstat(child)
            except OSError as exc:
                return "%s cannot be examined: %s" % (child, exc.strerror)
        # a sticky world-writable folder is fine on the way to an entry root owns (checked next)
        problem = _component_problem(shown, current, uid, sticky_parent_ok=nxt is not None and nxt.st_uid == uid)
        if problem or nxt is None:
            return problem
        current = nxt  # a link on the way: what it resolves to is checked by path_problem
    return None


def path_problem(path, uid=0):
    """Why root may not trust PATH (None when it may): the path as given, then as resolved, root's alone up to
    ``/``."""
    problem = chain_problem(path, uid)
    if problem is None:
        resolved = os.path.realpath(path)
        if resolved != os.path.abspath(path):
            problem = chain_problem(resolved, uid)
    return problem


def tree_problem(root, uid=0):
    """Why an entry below ROOT is not root's alone (None when none is), without following links."""
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except OSError as exc:
                return "%s cannot be examined: %s" % (path, exc.strerror)
            problem = _component_problem(path, info, uid, sticky_parent_ok=False)
            if problem:
                return problem
    return None


def interpreter_problem(python, uid=0):
    """Why root may not run PYTHON (a venv's bin/python) with a secret: the interpreter and every folder above it,
    as given and as resolved, and every entry of its venv, must be root's alone. None when it may."""
    venv = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    return path_problem(python, uid) or path_problem(venv, uid) or tree_problem(venv, uid)


def planted_link_problem(path, uid=0):
    """Why a folder on the way to PATH (PATH itself is its caller's to check) is a link another user could have
    planted: one not owned by UID, or held by a folder that is not UID's alone up to ``/``. None when there is none:
    links root made in root's folders (``/opt/sglang/current``) are the layout's own."""
    for shown in chain_paths(path)[1:-1]:
        try:
            info = os.lstat(shown)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return "%s cannot be examined: %s" % (shown, exc.strerror)
        if not stat.S_ISLNK(info.st_mode):
            continue
        problem = "the link is owned by uid %d" % info.st_uid if info.st_uid != uid else \
            chain_problem(os.path.dirname(shown), uid)
        if problem:
            try:
                target = os.readlink(shown)
            except OSError:
                target = "?"
            return ("%s is a symlink (to %s) another user could have planted (%s): root follows no such link on "
                    "the way to %s" % (shown, target, problem, path))
    return None
