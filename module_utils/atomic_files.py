# -*- coding: utf-8 -*-
"""Replace several files together or not at all, through no symlink, and never over an edit made meanwhile.

Each new content goes to a temporary file in the target's own directory (same
filesystem, so the rename is atomic), gets the old file's mode and owner, and
is fsynced. Only when every temporary file is ready are the targets replaced;
if a replacement fails, the files already replaced get their old bytes back
the same way. A crash can at worst leave a stray temporary file, never a
half-written target.

Symlinks. Every directory is opened once and worked in through its descriptor
(``dir_fd``), so a directory swapped for a symlink after a check cannot redirect
a write. With ``root`` (the fusion patch: the venv; the NCCL hook: site-packages)
every component below ``root`` is opened with ``O_NOFOLLOW``: a symlink there,
the file itself included, is refused with ``UnsafePath`` naming the link, so
nothing is written outside ``root``'s real directory and a link is never turned
into a regular file. Without ``root`` (records, reports) a symlink in place of
the file is replaced by the new regular file: nothing is written through it, and
its target's mode and owner are not copied. Modes and owners are set on open
descriptors (``fchmod``/``fchown``), never through a path that could be a link.

Edits made meanwhile. ``replace_all`` re-reads each target right before its
rename and refuses (``ChangedMeanwhile``, naming the file) when its bytes differ
from the ``old`` bytes the caller planned from, or, given the identity the
caller read it with (``read_snapshot``), when it is another file (inode) or was
written since (mtime, size). Files already replaced in that run get their old
bytes back. What remains is the instant between that re-check and the rename
itself, which no lock-free writer can close.
"""
from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import secrets
import stat

from ansible.module_utils import root_trust


class TransactionError(Exception):
    """Raised after a failed multi-file write; every target holds its old bytes again."""


class UnsafePath(TransactionError):
    """A write that would go through a symlink or leave its root; nothing was written. The message names the link."""


class ChangedMeanwhile(TransactionError):
    """A file changed between the caller's read and the rename; the message names it."""


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    with open(path, "rb") as handle:
        return sha256_bytes(handle.read())


def read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def identity(info):
    """What tells a file apart from another one, or from itself before a write: device, inode, mtime, size."""
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def read_snapshot(path):
    """(bytes, identity) of PATH, both from one open descriptor."""
    with open(path, "rb") as handle:
        data = handle.read()
        return data, identity(os.fstat(handle.fileno()))


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


def _below(root, path):
    """The components of PATH below ROOT (both taken as given, not resolved); UnsafePath when PATH is not below."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    parts = rel.split(os.sep)
    if rel in (".", "") or parts[0] == os.pardir:
        raise UnsafePath("%s is not inside %s; nothing was written" % (path, root))
    return parts


def _link_message(shown, root, path):
    try:
        target = os.readlink(shown)
    except OSError:
        target = "?"
    return ("%s is a symlink (to %s): this module writes nothing through a symlink under %s, so %s stays "
            "inside %s and a link is never turned into a file; replace the link with the real file or directory "
            "(or point the task at the real path)" % (shown, target, root, path, os.path.realpath(root)))


def link_problem(root, path):
    """Why writing PATH would go through a symlink below ROOT (or PATH is not below ROOT): a message naming the link,
    or None. Symlinks at or above ROOT are ROOT's own location (``/opt/sglang/current``) and count as expected; a
    component that does not exist yet would be created as a real directory."""
    try:
        parts = _below(root, path)
    except UnsafePath as exc:
        return str(exc)
    shown = os.path.abspath(root)
    for part in parts:
        shown = os.path.join(shown, part)
        try:
            info = os.lstat(shown)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return "%s cannot be examined: %s" % (shown, exc.strerror or exc)
        if stat.S_ISLNK(info.st_mode):
            return _link_message(shown, root, path)
    return None


class _Target(object):
    """A file as a name in an open directory. With ROOT, every directory below it was opened without following a
    symlink and the name itself may not be a symlink."""

    def __init__(self, path, root=None):
        self.path = path
        self.root = root
        if root is None:
            directory, self.name = os.path.split(os.path.abspath(path))
            self.dirfd = os.open(directory, _DIR_FLAGS)
            return
        parts = _below(root, path)
        self.name = parts[-1]
        self.dirfd = os.open(os.path.realpath(root), _DIR_FLAGS)
        shown = os.path.abspath(root)
        try:
            for part in parts[:-1]:
                shown = os.path.join(shown, part)
                try:
                    fd = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=self.dirfd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(shown):
                        raise UnsafePath(_link_message(shown, root, path))
                    raise
                os.close(self.dirfd)
                self.dirfd = fd
            info = self.lstat()
            if info is not None and stat.S_ISLNK(info.st_mode):
                raise UnsafePath(_link_message(path, root, path))
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.dirfd is not None:
            os.close(self.dirfd)
            self.dirfd = None

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def lstat(self):
        try:
            return os.lstat(self.name, dir_fd=self.dirfd)
        except FileNotFoundError:
            return None

    def read(self):
        """(bytes, identity) of the regular file that is there now, or None when there is none."""
        try:
            fd = os.open(self.name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0) |
                         getattr(os, "O_NONBLOCK", 0), dir_fd=self.dirfd)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ChangedMeanwhile("%s is no longer a regular file; nothing more was written" % self.path)
            return handle.read(), identity(info)

    def stage(self, data, mode=0o644, attributes=None, strict_owner=True):
        """A temporary file next to the target holding DATA, fsynced; its name.

        ATTRIBUTES (mode, uid, gid) are set exactly (an owner this user may not give is an error unless not
        STRICT_OWNER); otherwise the mode and owner of the regular file there now (none, or a symlink: MODE, and
        this user)."""
        for _attempt in range(100):
            tmp = ".%s.%s.tmp" % (self.name, secrets.token_hex(4))
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                             0o600, dir_fd=self.dirfd)
                break
            except FileExistsError:
                continue
        else:
            raise OSError(errno.EEXIST, "no free temporary name next to %s" % self.path)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                if attributes is not None:
                    wanted_mode, uid, gid = attributes
                    try:
                        os.fchown(handle.fileno(), uid, gid)
                    except PermissionError:
                        if strict_owner:
                            raise
                    os.fchmod(handle.fileno(), wanted_mode)  # after chown, which clears set-id bits
                else:
                    info = self.lstat()
                    if info is not None and stat.S_ISREG(info.st_mode):
                        os.fchmod(handle.fileno(), info.st_mode & 0o7777)
                        try:
                            os.fchown(handle.fileno(), info.st_uid, info.st_gid)
                        except PermissionError:
                            pass  # not root: the file stays ours, as the old one was
                    else:
                        os.fchmod(handle.fileno(), mode)
        except BaseException:
            self.unlink(tmp)
            raise
        return tmp

    def verify(self, expected, ident=None):
        """ChangedMeanwhile unless the target still holds EXPECTED (None: does not exist) and, given IDENT, is the
        same file unwritten since."""
        info = self.lstat()
        if expected is None:
            if info is not None:
                raise ChangedMeanwhile("%s appeared after it was read (absent then): another process created it "
                                       "meanwhile; it was left as it is" % self.path)
            return
        if info is None:
            raise ChangedMeanwhile("%s was removed after it was read: another process removed it meanwhile"
                                   % self.path)
        if stat.S_ISLNK(info.st_mode):
            raise ChangedMeanwhile("%s was replaced by a symlink after it was read; it was left as it is" % self.path)
        found = self.read()
        if found is None:
            raise ChangedMeanwhile("%s was removed after it was read" % self.path)
        data, now = found
        if sha256_bytes(data) != sha256_bytes(expected):
            raise ChangedMeanwhile("%s changed after it was read (sha256 %s then, %s now): another process edited "
                                   "it meanwhile; its edit is kept" % (
                                       self.path, sha256_bytes(expected), sha256_bytes(data)))
        if ident is not None and now != tuple(ident):
            raise ChangedMeanwhile("%s is not the file that was read (inode %s, mtime %s ns then; inode %s, mtime "
                                   "%s ns now): another process replaced or rewrote it meanwhile; it was left as it "
                                   "is" % (self.path, ident[1], ident[2], now[1], now[2]))

    def replace(self, tmp):
        os.replace(tmp, self.name, src_dir_fd=self.dirfd, dst_dir_fd=self.dirfd)

    def remove(self):
        os.unlink(self.name, dir_fd=self.dirfd)

    def unlink(self, name):
        try:
            os.unlink(name, dir_fd=self.dirfd)
        except OSError:
            pass

    def fsync(self):
        try:
            os.fsync(self.dirfd)
        except OSError:
            pass


_ANY = object()


def stage(path, data, like=None, mode=0o644):
    """Write ``data`` to a temp file next to ``path`` with the mode/owner of the regular file at ``like`` (default
    path; a symlink there is not followed, its target's mode and owner are not copied). A new file gets ``mode``.
    Returns the temp file's path."""
    attributes = None
    if like is not None and os.path.abspath(like) != os.path.abspath(path):
        try:
            info = os.lstat(like)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISREG(info.st_mode):
            attributes = (info.st_mode & 0o7777, info.st_uid, info.st_gid)
    with _Target(path) as target:
        tmp = target.stage(data, mode, attributes, strict_owner=False)
        return os.path.join(os.path.dirname(os.path.abspath(path)), tmp)


ANY = _ANY  # write_atomic's EXPECT when anything may be there


def write_atomic(path, data, mode=0o644, root=None, attributes=None, expect=_ANY, ident=None):
    """One file, atomically (temp + fsync + rename).

    ROOT: refuse (UnsafePath) a symlink below it, the file included. ATTRIBUTES: (mode, uid, gid) set exactly on the
    new file before it is renamed in. EXPECT: bytes the file must still hold (None: must not exist), and IDENT the
    identity it was read with (read_snapshot), re-checked just before the rename (ChangedMeanwhile)."""
    with _Target(path, root) as target:
        tmp = target.stage(data, mode, attributes)
        try:
            if expect is not _ANY:
                target.verify(expect, ident)
            target.replace(tmp)
        except BaseException:
            target.unlink(tmp)
            raise
        target.fsync()


def set_owner_mode(path, mode, uid=None, gid=None, directory=False, ident=None):
    """Set MODE (and the owner, where UID and GID are given) on PATH itself, through a descriptor opened without
    following a symlink: a link in its place is refused (UnsafePath, naming it) and its target never changes. Also
    refused: a PATH of the other kind (file or directory), or, given IDENT (read_snapshot's), another file than the
    one that was read."""
    flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if directory:
        flags |= getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if os.path.islink(path):
            raise UnsafePath("%s is a symlink (to %s): its owner and mode were not set, nor its target's; replace "
                             "the link with the %s itself" % (path, os.readlink(path),
                                                              "directory" if directory else "file"))
        raise
    try:
        info = os.fstat(fd)
        if not (stat.S_ISDIR if directory else stat.S_ISREG)(info.st_mode):
            raise UnsafePath("%s is not a %s: its owner and mode were not set" % (
                path, "directory" if directory else "regular file"))
        if ident is not None and identity(info)[:2] != tuple(ident)[:2]:
            raise ChangedMeanwhile("%s is not the file that was read (another process replaced it meanwhile); its "
                                   "owner and mode were not set" % path)
        if uid is not None and gid is not None:
            os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)  # after chown, which clears set-id bits
    finally:
        os.close(fd)


def _root_of(roots, path):
    if isinstance(roots, dict):
        return roots.get(path)
    return roots


def replace_all(changes, root=None, identities=None, before_rename=None):
    """Apply ``changes`` = [(path, old_bytes, new_bytes)] all together or not at all.

    ``old_bytes`` None means the file does not exist yet: undoing it removes it. Right before its rename each file
    must still hold ``old_bytes`` (and, for a path in ``identities``, be the same file, unwritten since: see
    read_snapshot), or the run stops with ChangedMeanwhile and the files already renamed get their old bytes back.
    ``root``: a directory (or {path: directory}) no path may leave through a symlink (see module doc).
    ``before_rename(path)`` is called just before each file's re-check (tests use it to edit a file meanwhile).
    """
    identities = identities or {}
    staged = []
    try:
        for path, _old, new in changes:
            target = _Target(path, _root_of(root, path))
            try:
                staged.append((path, target, target.stage(new)))
            except BaseException:
                target.close()
                raise
    except BaseException as exc:
        for _path, target, tmp in staged:
            target.unlink(tmp)
            target.close()
        if isinstance(exc, UnsafePath):
            raise UnsafePath("%s; nothing was changed" % exc)
        raise TransactionError("could not stage %s: %s; nothing was changed" % (
            changes[len(staged)][0], exc))
    olds = dict((path, old) for path, old, _new in changes)
    news = dict((path, new) for path, _old, new in changes)
    done = []
    try:
        for path, target, tmp in staged:
            if before_rename is not None:
                before_rename(path)
            target.verify(olds[path], identities.get(path))
            target.replace(tmp)
            done.append((path, target))
    except BaseException as exc:
        failed = staged[len(done)][0]
        for _path, target, tmp in staged[len(done):]:
            target.unlink(tmp)
        unrestored = []
        for path, target in reversed(done):
            try:
                if olds[path] is None:
                    target.verify(news[path])
                    target.remove()
                else:
                    tmp = target.stage(olds[path])
                    try:
                        target.verify(news[path])
                        target.replace(tmp)
                    except BaseException:
                        target.unlink(tmp)
                        raise
                    target.fsync()
            except ChangedMeanwhile:
                unrestored.append("%s (changed again after this run wrote it: left as it is now)" % path)
            except BaseException as undo:  # keep going: restore as many as we can, then say which failed
                unrestored.append("%s (%s)" % (path, undo))
        for _path, target, _tmp in staged:
            target.close()
        what = str(exc) if isinstance(exc, ChangedMeanwhile) else "writing %s failed (%s)" % (failed, exc)
        if unrestored:
            raise TransactionError("%s; could not restore %s" % (what, "; ".join(unrestored)))
        error = ChangedMeanwhile if isinstance(exc, ChangedMeanwhile) else TransactionError
        raise error("%s; %d file(s) already written were restored, nothing was changed" % (what, len(done)))
    for _path, target, _tmp in staged:
        target.fsync()
        target.close()


class RecordError(Exception):
    """A small record file (a verdict, a choice) that cannot be read or written; the message names it."""


def read_record(path):
    """The record's text, or None when there is none: a regular file only, never read through a symlink in its
    place nor opened when it is a FIFO or device (RecordError, naming it)."""
    return read_regular(path, limit=16 << 20)


def read_regular(path, limit=1 << 20):
    """The text of the regular file at PATH, or None when there is none: opened without following a symlink in its
    place and without blocking (a FIFO or device is refused, never opened for a read that waits), at most LIMIT
    bytes. RecordError, naming the file, for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError("%s is a symlink: it is read only as a regular file, never through a link" % path)
        raise RecordError("cannot read %s: %s" % (path, exc.strerror))
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder too: fdopen would raise on it
        os.close(fd)
        raise RecordError("cannot read %s: it is not a regular file (a folder, FIFO or device is never read)" % path)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise RecordError("%s is larger than %d bytes: it is not read" % (path, limit))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError("cannot read %s: %s" % (path, exc))


def put_record(path, text, mode=0o644):
    """Write the record atomically (MODE when it is new; one there keeps its own), or remove it when ``text`` is
    None; the old one stays on failure. As root, only in a folder that only root can change, every folder above it
    too (root_trust.path_problem): a link another user planted on the way is never followed."""
    directory = os.path.dirname(os.path.abspath(path))
    problem = root_trust.path_problem(directory) if os.geteuid() == 0 and os.path.isdir(directory) else None
    if problem:
        raise RecordError("%s; root writes and removes a record only in a folder that only root can change, every "
                          "folder above it too: %s was not changed" % (problem, path))
    try:
        if text is None:
            if os.path.lexists(path):
                os.unlink(path)
            return
        if not os.path.isdir(directory):
            raise RecordError("%s is not a directory" % directory)
        write_atomic(path, text.encode("utf-8"), mode=mode)
    except OSError as exc:
        raise RecordError("updating %s failed: %s (the old record is unchanged)" % (path, exc))


def record_diff(path, before, after):
    """Ansible's diff of a record (None: no file)."""
    return {"before": before or "", "after": after or "", "before_header": path, "after_header": path}


def invalidate_bytecode(path, root=None):
    """Remove cached bytecode of ``path`` for every interpreter tag and optimisation level.

    The directory is reached as for a write (with ROOT, through no symlink below it); a ``__pycache__`` that is a
    symlink is not entered."""
    stem = os.path.splitext(os.path.basename(path))[0]
    pattern = stem + ".*.pyc"
    cache = os.path.join(os.path.dirname(os.path.abspath(path)), "__pycache__")
    removed = []
    with _Target(path, root) as target:
        try:
            fd = os.open("__pycache__", _DIR_FLAGS | _NOFOLLOW, dir_fd=target.dirfd)
        except OSError:
            return removed  # none, or a symlink: nothing of ours to remove
    try:
        for name in sorted(os.listdir(fd)):
            if fnmatch.fnmatchcase(name, pattern):
                try:
                    os.unlink(name, dir_fd=fd)
                    removed.append(os.path.join(cache, name))
                except FileNotFoundError:
                    pass
    finally:
        os.close(fd)
    return removed


def prune_dir(root, directory, keep):
    """Remove every entry of DIRECTORY (below ROOT, reached through no symlink) whose name is not in KEEP; a
    subdirectory is left. Returns the paths removed; a DIRECTORY that is not there removes nothing."""
    removed = []
    try:
        target = _Target(os.path.join(directory, "x"), root)
    except FileNotFoundError:
        return removed
    with target:
        for name in sorted(os.listdir(target.dirfd)):
            if name in keep:
                continue
            try:
                os.unlink(name, dir_fd=target.dirfd)
                removed.append(os.path.join(directory, name))
            except (FileNotFoundError, IsADirectoryError):
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
