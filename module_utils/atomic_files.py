# -*- coding: utf-8 -*-
"""Replace several files together or not at all.

Each new content goes to a temporary file in the target's own directory (same
filesystem, so ``os.replace`` is atomic), gets the old file's mode and owner,
and is fsynced. Only when every temporary file is ready are the targets
replaced; if a replacement fails, the files already replaced get their old
bytes back the same way. A crash can at worst leave a stray temporary file,
never a half-written target.
"""
from __future__ import annotations

import glob
import hashlib
import os
import tempfile


class TransactionError(Exception):
    """Raised after a failed multi-file write; every target holds its old bytes again."""


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    with open(path, "rb") as handle:
        return sha256_bytes(handle.read())


def read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def stage(path, data, like=None, mode=0o644):
    """Write ``data`` to a temp file next to ``path`` with the mode/owner of ``like`` (default path).

    A new file (nothing to copy from) gets ``mode``.
    """
    like = like or path
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if os.path.exists(like):
            info = os.stat(like)
            os.chmod(tmp, info.st_mode & 0o7777)
            if hasattr(os, "chown"):
                try:
                    os.chown(tmp, info.st_uid, info.st_gid)
                except PermissionError:
                    pass  # not root: the file stays ours, as the old one was
        else:
            os.chmod(tmp, mode)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def write_atomic(path, data, mode=0o644):
    """One file, atomically (temp + fsync + rename)."""
    tmp = stage(path, data, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def replace_all(changes):
    """Apply ``changes`` = [(path, old_bytes, new_bytes)] all together or not at all.

    ``old_bytes`` None means the file does not exist yet: undoing it removes it.
    """
    staged = []
    try:
        for path, _old, new in changes:
            staged.append((path, stage(path, new)))
    except BaseException as exc:
        for _path, tmp in staged:
            _unlink_quietly(tmp)
        raise TransactionError("could not stage %s: %s; nothing was changed" % (
            changes[len(staged)][0], exc))
    done = []
    try:
        for path, tmp in staged:
            os.replace(tmp, path)
            done.append(path)
    except BaseException as exc:
        failed = staged[len(done)][0]
        for _path, tmp in staged[len(done):]:
            _unlink_quietly(tmp)
        olds = dict((path, old) for path, old, _new in changes)
        unrestored = []
        for path in reversed(done):
            try:
                if olds[path] is None:
                    os.unlink(path)
                else:
                    write_atomic(path, olds[path])
            except BaseException:  # keep going: restore as many as we can, then say which failed
                unrestored.append(path)
        if unrestored:
            raise TransactionError("writing %s failed (%s) and %s could not be restored" % (
                failed, exc, ", ".join(unrestored)))
        raise TransactionError("writing %s failed (%s); %d file(s) already written were restored, "
                               "nothing was changed" % (failed, exc, len(done)))
    for directory in sorted(set(os.path.dirname(os.path.abspath(p)) for p, _o, _n in changes)):
        fsync_dir(directory)


class RecordError(Exception):
    """A small record file (a verdict, a choice) that cannot be read or written; the message names it."""


def read_record(path):
    """The record's text, or None when there is none."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError("cannot read %s: %s" % (path, exc))


def put_record(path, text):
    """Write the record atomically, or remove it when ``text`` is None; the old one stays on failure."""
    try:
        if text is None:
            if os.path.lexists(path):
                os.unlink(path)
            return
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise RecordError("%s is not a directory" % directory)
        write_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise RecordError("updating %s failed: %s (the old record is unchanged)" % (path, exc))


def record_diff(path, before, after):
    """Ansible's diff of a record (None: no file)."""
    return {"before": before or "", "after": after or "", "before_header": path, "after_header": path}


def invalidate_bytecode(path):
    """Remove cached bytecode of ``path`` for every interpreter tag and optimisation level."""
    directory, name = os.path.split(os.path.abspath(path))
    stem = os.path.splitext(name)[0]
    removed = []
    for pyc in glob.glob(os.path.join(directory, "__pycache__", glob.escape(stem) + ".*.pyc")):
        try:
            os.unlink(pyc)
            removed.append(pyc)
        except FileNotFoundError:
            pass
    return removed


def writable_problem(path):
    """Why ``path`` cannot be replaced in place, or None.

    Root passes ``os.access`` for any file, so a file with no write bit at all is
    taken as deliberately read-only too; a read-only mount is detected as well.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(path):
        return "%s does not exist" % path
    info = os.stat(path)
    if not info.st_mode & 0o222:
        return "%s is read-only (mode %o)" % (path, info.st_mode & 0o7777)
    if not os.access(path, os.W_OK):
        return "%s is not writable by this user" % path
    if not os.access(directory, os.W_OK | os.X_OK):
        return "directory %s is not writable (needed for an atomic replace)" % directory
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "%s is on a read-only filesystem" % path
    except (AttributeError, OSError):
        pass
    return None
