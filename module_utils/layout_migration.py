# -*- coding: utf-8 -*-
"""Moving a host deployed by the earlier layout to the root-owned one: the records root decides from and the models
tree leave the service user's home for folders only root can write.

Each entry is renamed (``renameat`` between directory descriptors: the entry itself moves, a link is never followed)
and then checked where it landed, out of the service user's reach: it and everything under it must be a regular file
or folder (or, inside a moved folder, a link to an entry of its own folder, as a model's ``current``), owned by root,
not writable by group or others, and a file must have no second name (a hard link to a file elsewhere). An entry
that fails is renamed back and the move refused, naming the path and the rule: what the service user could have
planted is never carried into root's folders. An entry already at its new place stays (the new
layout's is the one in use); nothing is copied, so nothing is lost or doubled.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import stat

from ansible.module_utils.root_trust import chain_problem

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class MigrationRefused(Exception):
    """An entry the migration will not carry; the message names the path and the rule."""


def _kind(mode):
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return None


def sibling_link(target):
    """Whether a link's TARGET names an entry of its own folder (a model's ``current`` -> ``<revision>``): inside a
    moved tree it then resolves inside that tree, whose every entry is checked."""
    return bool(target) and "/" not in target and target not in (".", "..")


def entry_problem(path, info, uid=0, link_target=None):
    """Why one entry (its lstat INFO) may not live in root's folders; None when it may. A link passes only with
    LINK_TARGET given and naming a sibling (inside a moved tree; the entry moved itself is never a link)."""
    kind = _kind(info.st_mode)
    if kind == "a symbolic link" and sibling_link(link_target):
        kind = None
    if kind:
        if link_target is not None:
            return "%s is a symbolic link to %s: only links to an entry of their own folder are carried" % (
                path, link_target)
        return "%s is %s: only regular files and folders are carried" % (path, kind)
    if info.st_uid != uid:
        return "%s is owned by uid %d: root carries only what root wrote" % (path, info.st_uid)
    if info.st_mode & 0o022 and not stat.S_ISLNK(info.st_mode):  # a link's own mode means nothing
        return "%s is writable by group or others (mode %04o)" % (path, stat.S_IMODE(info.st_mode))
    if stat.S_ISREG(info.st_mode) and info.st_nlink != 1:
        return "%s has %d names (a hard link to a file elsewhere)" % (path, info.st_nlink)
    return None


def moved_problem(path, uid=0):
    """Why the entry at PATH (just moved) or anything under it may not stay; None when all of it may. Walked from
    directory descriptors, no link followed."""
    info = os.lstat(path)
    problem = entry_problem(path, info, uid)
    if problem or not stat.S_ISDIR(info.st_mode):
        return problem
    return _tree_problem(os.open(path, _DIR_FLAGS), path, uid)


def _tree_problem(fd, shown, uid):
    try:
        for name in sorted(os.listdir(fd)):
            child = os.path.join(shown, name)
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            target = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(info.st_mode) else None
            problem = entry_problem(child, info, uid, target)
            if problem:
                return problem
            if stat.S_ISDIR(info.st_mode):
                problem = _tree_problem(os.open(name, _DIR_FLAGS, dir_fd=fd), child, uid)
                if problem:
                    return problem
        return None
    finally:
        os.close(fd)


def _lstat_at(fd, name):
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def plan(moves, patterns_from=None, listdir=os.listdir):
    """The (src, dest) pairs to consider: MOVES as given, plus, for each (src_dir, dest_dir, pattern) of
    PATTERNS_FROM, every name in src_dir the fnmatch PATTERN matches whole."""
    pairs = [(os.path.normpath(src), os.path.normpath(dest)) for src, dest in moves]
    for src_dir, dest_dir, pattern in patterns_from or []:
        try:
            names = listdir(src_dir)
        except FileNotFoundError:
            continue
        for name in sorted(names):
            if fnmatch.fnmatchcase(name, pattern):
                pairs.append((os.path.join(src_dir, name), os.path.join(dest_dir, name)))
    return pairs


def move(src, dest, check=False, uid=0):
    """Move SRC to DEST unless there is nothing to move; returns 'moved', 'would move', 'absent' (no SRC) or 'kept'
    (DEST already there). DEST's folder must exist and be root's alone up to /; raises MigrationRefused."""
    if src == dest:
        return "kept"
    dest_dir, dest_name = os.path.split(dest)
    src_dir, src_name = os.path.split(src)
    problem = chain_problem(dest_dir, uid)
    if problem:
        raise MigrationRefused("%s cannot receive %s: %s" % (dest_dir, src, problem))
    try:
        src_fd = os.open(src_dir, _DIR_FLAGS)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        raise MigrationRefused("%s cannot be opened as a folder without following a link: %s"
                               % (src_dir, exc.strerror)) from None
    try:
        dest_fd = os.open(dest_dir, _DIR_FLAGS)
        try:
            return _move_at(src_fd, src_name, src, dest_fd, dest_name, dest, check, uid)
        finally:
            os.close(dest_fd)
    finally:
        os.close(src_fd)


def _move_at(src_fd, src_name, src, dest_fd, dest_name, dest, check, uid):
    info = _lstat_at(src_fd, src_name)
    if info is None:
        return "absent"
    existing = _lstat_at(dest_fd, dest_name)
    if existing is not None:
        if stat.S_ISDIR(existing.st_mode) and stat.S_ISDIR(info.st_mode) and not os.listdir(dest):
            # an empty folder made before the move (an interrupted run's): the move replaces it
            if check:
                return "would move"
            os.rmdir(dest_name, dir_fd=dest_fd)
        else:
            return "kept"
    problem = entry_problem(src, info, uid)
    if problem:
        raise MigrationRefused("not moved to %s: %s" % (dest, problem))
    if check:
        return "would move"
    try:
        os.rename(src_name, dest_name, src_dir_fd=src_fd, dst_dir_fd=dest_fd)
    except OSError as exc:
        if exc.errno in (errno.EXDEV, errno.EBUSY):
            raise MigrationRefused("%s cannot be renamed to %s (%s: another filesystem or a mount point); move it "
                                   "there yourself as root, or set the new location to where it is mounted once that "
                                   "folder and every one above it are root's alone" % (src, dest, exc.strerror)) from None
        raise MigrationRefused("%s cannot be renamed to %s: %s" % (src, dest, exc.strerror)) from None
    problem = moved_problem(dest, uid)
    if problem:
        # back where it was: nothing the service user could have planted stays in root's folders
        os.rename(dest_name, src_name, src_dir_fd=dest_fd, dst_dir_fd=src_fd)
        raise MigrationRefused("not moved to %s (put back): %s" % (dest, problem))
    return "moved"


def ensure_folder(path, check=False, mode=0o755):
    """Create PATH (its parent must exist) root's, MODE, unless it is there; True when it was (or would be) made."""
    if os.path.lexists(path):
        return False
    if not check:
        os.mkdir(path, mode)
        os.chmod(path, mode)
    return True
