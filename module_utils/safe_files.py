# -*- coding: utf-8 -*-
"""File operations root does inside a folder another user may write (the models tree): never through a link.

Every path is taken relative to a trusted ROOT (the models directory, opened once as given: links at or above it are
its own location) and walked component by component from a directory descriptor, each folder opened with
``O_NOFOLLOW | O_DIRECTORY``. A file is ``lstat``-ed before it is opened (a FIFO, socket or device is refused before
any open: a FIFO opened for reading never returns), then opened with ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat``-ed
again (it must be the same regular file). Writes are atomic (a temporary file in the same folder, fsync,
``renameat``); modes are set with ``fchmod`` on descriptors only; a link is never chmod-ed or removed through (only
the link itself is unlinked); trees are removed by a descriptor-relative walk that never follows a link.

Folders root writes into (``owned=True``) must also be owned by root (this process's user) and not writable by group
or others: a folder the service user can change could be changed under the write.

Every refusal is ``UnsafeFile``, whose message names the path and the rule it breaks.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC

RULE_LINK = "a symbolic link: root follows no link inside %s"
RULE_KIND = "%s, not a regular file or folder: root opens nothing else inside %s"
RULE_OWNER = "%s: root writes only into folders that only root can change"


class UnsafeFile(Exception):
    """A path inside the tree that root refuses to use; the message names the path and the rule."""


def kind_of(mode):
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "of an unknown kind"


def parts_of(relative):
    """The components of a path relative to the root; UnsafeFile for an absolute path or a '..', '.' or empty part."""
    if isinstance(relative, (list, tuple)):
        parts = list(relative)
    else:
        parts = relative.split("/")
    if not parts or any(part in ("", ".", "..") or "/" in part or "\x00" in part for part in parts):
        raise UnsafeFile("%r is not a plain relative path (no empty, '.' or '..' part): root acts only inside "
                         "its tree" % (relative,))
    return parts


class Tree(object):
    """A trusted folder, opened once; every operation is relative to its descriptor."""

    def __init__(self, root, create=False, mode=0o755):
        self.root = os.path.abspath(root)
        if create:
            os.makedirs(self.root, mode=mode, exist_ok=True)
        try:
            self.fd = os.open(self.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
        except NotADirectoryError:
            raise UnsafeFile("%s is not a folder" % self.root)
        self.uid = os.geteuid()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def shown(self, parts):
        return os.path.join(self.root, *parts)

    # ---------------------------------------------------------------------------------------------- examining

    def lstat_at(self, dirfd, name, parts):
        try:
            return os.lstat(name, dir_fd=dirfd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UnsafeFile("%s cannot be examined: %s" % (self.shown(parts), exc.strerror or exc))

    def refuse_kind(self, parts, info, want):
        """UnsafeFile unless INFO is WANT ('file', 'folder' or 'either')."""
        ok = {"file": stat.S_ISREG, "folder": stat.S_ISDIR}.get(want)
        if ok is not None and ok(info.st_mode):
            return
        if want == "either" and (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
            return
        where = self.shown(parts)
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(where)
            except OSError:
                target = "?"
            raise UnsafeFile("%s is %s (to %s)" % (where, RULE_LINK % self.root, target))
        if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
            raise UnsafeFile("%s is %s where %s is expected: nothing was changed" % (
                where, kind_of(info.st_mode), "a folder" if want == "folder" else "a regular file"))
        raise UnsafeFile("%s is %s" % (where, RULE_KIND % (kind_of(info.st_mode), self.root)))

    def refuse_foreign(self, parts, info):
        if info.st_uid != self.uid:
            raise UnsafeFile("%s is owned by uid %d, not %d (%s)" % (
                self.shown(parts), info.st_uid, self.uid, RULE_OWNER % "refused"))
        if info.st_mode & 0o022:
            raise UnsafeFile("%s is writable by group or others (mode %04o; %s)" % (
                self.shown(parts), stat.S_IMODE(info.st_mode), RULE_OWNER % "refused"))

    def stat(self, relative):
        """lstat of the path (None when it or a folder on its way is absent); a link on the way is refused."""
        parts = parts_of(relative)
        try:
            fd = self.open_dir(parts[:-1])
        except FileNotFoundError:
            return None
        try:
            return self.lstat_at(fd, parts[-1], parts)
        finally:
            os.close(fd)

    def kind(self, relative):
        """'file', 'folder' or None (absent); anything else (a link, a FIFO) refused."""
        info = self.stat(relative)
        if info is None:
            return None
        self.refuse_kind(parts_of(relative), info, "either")
        return "folder" if stat.S_ISDIR(info.st_mode) else "file"

    # ---------------------------------------------------------------------------------------------- folders

    def open_dir(self, relative, create=False, mode=0o755, owned=False):
        """A descriptor of the folder (the root itself for []), reached through no link. CREATE makes missing
        folders (MODE); OWNED refuses a folder (from the first one created or checked) not owned by root or
        writable by group or others. FileNotFoundError when absent and not CREATE."""
        parts = parts_of(relative) if relative else []
        fd = os.dup(self.fd)
        try:
            for index, part in enumerate(parts):
                here = parts[:index + 1]
                info = self.lstat_at(fd, part, here)
                if info is None:
                    if not create:
                        raise FileNotFoundError(errno.ENOENT, "no such folder", self.shown(here))
                    try:
                        os.mkdir(part, mode, dir_fd=fd)
                    except FileExistsError:
                        pass
                    info = self.lstat_at(fd, part, here)
                    if info is None:
                        raise FileNotFoundError(errno.ENOENT, "no such folder", self.shown(here))
                self.refuse_kind(here, info, "folder")
                try:
                    child = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        self.refuse_kind(here, self.lstat_at(fd, part, here) or info, "folder")
                    raise
                os.close(fd)
                fd = child
                if owned:
                    self.refuse_foreign(here, os.fstat(fd))
            return fd
        except BaseException:
            os.close(fd)
            raise

    def listdir(self, relative, owned=False):
        """The names in a folder ([] when it is absent); OWNED: only a folder root alone can change is listed."""
        try:
            fd = self.open_dir(relative, owned=owned)
        except FileNotFoundError:
            return []
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    # ---------------------------------------------------------------------------------------------- files

    def open_file(self, relative, flags=os.O_RDONLY, mode=0o644, owned=False, create_dirs=False):
        """A descriptor of the regular file (opened without following a link, refused before opening when it is
        anything else); FileNotFoundError when absent (and O_CREAT not in FLAGS)."""
        parts = parts_of(relative)
        dirfd = self.open_dir(parts[:-1], create=create_dirs, owned=owned)
        try:
            info = self.lstat_at(dirfd, parts[-1], parts)
            if info is not None:
                self.refuse_kind(parts, info, "file")
            elif not flags & os.O_CREAT:
                raise FileNotFoundError(errno.ENOENT, "no such file", self.shown(parts))
            fd = os.open(parts[-1], flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, mode, dir_fd=dirfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EWOULDBLOCK):
                raise UnsafeFile("%s changed into something else while it was opened (%s): refused" % (
                    self.shown(parts), exc.strerror))
            raise
        finally:
            os.close(dirfd)
        now = os.fstat(fd)
        swapped = info is not None and (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino)
        if not stat.S_ISREG(now.st_mode) or swapped:
            os.close(fd)
            raise UnsafeFile("%s changed into %s while it was opened: refused" % (
                self.shown(parts), kind_of(now.st_mode)))
        return fd

    def read_bytes(self, relative, limit=None):
        """The file's bytes (at most LIMIT + 1, so a caller can tell it is too long); FileNotFoundError if absent."""
        fd = self.open_file(relative)
        with os.fdopen(fd, "rb") as handle:
            return handle.read() if limit is None else handle.read(limit + 1)

    def write_atomic(self, relative, data, mode=0o644):
        """Replace the file with DATA atomically (temporary file, fsync, fchmod, renameat); the folder must be
        root's (OWNED) and a link or anything but a regular file in the file's place is refused."""
        parts = parts_of(relative)
        dirfd = self.open_dir(parts[:-1], create=True, owned=True)
        try:
            info = self.lstat_at(dirfd, parts[-1], parts)
            if info is not None:
                self.refuse_kind(parts, info, "file")
            tmp = None
            for _attempt in range(100):
                tmp = ".tmp-%s-%s" % (parts[-1][:40], secrets.token_hex(4))
                try:
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600,
                                 dir_fd=dirfd)
                    break
                except FileExistsError:
                    continue
            else:
                raise UnsafeFile("no free temporary name next to %s" % self.shown(parts))
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                    os.fchmod(handle.fileno(), mode)
                os.rename(tmp, parts[-1], src_dir_fd=dirfd, dst_dir_fd=dirfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dirfd)
                except OSError:
                    pass
                raise
            os.fsync(dirfd)
        finally:
            os.close(dirfd)

    def unlink(self, relative, missing_ok=True):
        """Remove the file (a link is removed itself, never what it points at); a folder is refused."""
        parts = parts_of(relative)
        try:
            dirfd = self.open_dir(parts[:-1])
        except FileNotFoundError:
            if missing_ok:
                return False
            raise
        try:
            info = self.lstat_at(dirfd, parts[-1], parts)
            if info is None:
                if missing_ok:
                    return False
                raise FileNotFoundError(errno.ENOENT, "no such file", self.shown(parts))
            if stat.S_ISDIR(info.st_mode):
                raise UnsafeFile("%s is a folder where a file is expected: nothing was removed" % self.shown(parts))
            os.unlink(parts[-1], dir_fd=dirfd)
            return True
        finally:
            os.close(dirfd)

    def rename(self, folder, old, new):
        """Rename FOLDER/OLD to FOLDER/NEW in one folder (renameat); NEW must not exist."""
        dirfd = self.open_dir(folder, owned=False)
        try:
            if self.lstat_at(dirfd, new, parts_of(list(folder) + [new])) is not None:
                raise UnsafeFile("%s exists already: nothing was renamed onto it" % self.shown(list(folder) + [new]))
            os.rename(old, new, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            os.fsync(dirfd)
        finally:
            os.close(dirfd)

    # ---------------------------------------------------------------------------------------------- trees

    def walk(self, relative):
        """(parts, lstat) of everything below the folder, folders before their content, in name order; a link, a
        FIFO or anything else but a regular file or folder is refused (UnsafeFile naming it). Iterative: depth is
        not bounded by Python's recursion limit."""
        base = parts_of(relative)
        stack = [(base, self.open_dir(base))]
        found = []
        try:
            while stack:
                parts, fd = stack.pop()
                try:
                    names = sorted(os.listdir(fd))
                    for name in names:
                        here = parts + [name]
                        info = self.lstat_at(fd, name, here)
                        if info is None:
                            continue
                        self.refuse_kind(here, info, "either")
                        found.append((here, info))
                        if stat.S_ISDIR(info.st_mode):
                            child = os.open(name, DIR_FLAGS, dir_fd=fd)
                            stack.append((here, child))
                finally:
                    os.close(fd)
        except BaseException:
            for _parts, fd in stack:
                os.close(fd)
            raise
        return found

    def chmod_tree(self, relative, dir_mode=0o755, file_mode=0o644):
        """fchmod every folder (DIR_MODE) and file (FILE_MODE) of the tree, the folder itself included, each
        through a descriptor opened without following a link; anything else is refused before any change."""
        base = parts_of(relative)
        entries = self.walk(base)
        for parts in [base] + [parts for parts, info in entries if stat.S_ISDIR(info.st_mode)]:
            fd = self.open_dir(parts)
            try:
                os.fchmod(fd, dir_mode)
            finally:
                os.close(fd)
        for parts, info in entries:
            if stat.S_ISREG(info.st_mode):
                fd = self.open_file(parts)
                try:
                    os.fchmod(fd, file_mode)
                finally:
                    os.close(fd)

    def remove_tree(self, relative):
        """Remove the folder and everything in it, never following a link (a link inside is removed itself); the
        path itself must be a folder (a link in its place is refused). Iterative. False when it is absent."""
        parts = parts_of(relative)
        try:
            parent = self.open_dir(parts[:-1])
        except FileNotFoundError:
            return False
        try:
            info = self.lstat_at(parent, parts[-1], parts)
            if info is None:
                return False
            self.refuse_kind(parts, info, "folder")
            top = os.open(parts[-1], DIR_FLAGS, dir_fd=parent)
            stack = [(top, None, [])]  # (descriptor, its name in the folder above, names left)
            try:
                stack[0] = (top, None, sorted(os.listdir(top)))
                while stack:
                    fd, _name, names = stack[-1]
                    if not names:
                        stack.pop()
                        os.close(fd)
                        if stack:
                            os.rmdir(_name, dir_fd=stack[-1][0])
                        continue
                    name = names.pop()
                    try:
                        child = os.open(name, DIR_FLAGS, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                            raise
                        os.unlink(name, dir_fd=fd)  # a file, a link (itself), a FIFO: never opened
                        continue
                    stack.append((child, name, sorted(os.listdir(child))))
            except BaseException:
                for fd, _name, _names in stack:
                    os.close(fd)
                raise
            os.rmdir(parts[-1], dir_fd=parent)
            return True
        finally:
            os.close(parent)


def read_regular(path, limit):
    """Up to LIMIT + 1 bytes of the regular file at PATH (an operator's path outside any tree: links are its own),
    opened without blocking and refused unless it is a regular file (a FIFO would hang the read)."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile("%s is %s, not a regular file: it is not read" % (path, kind_of(info.st_mode)))
        return handle.read(limit + 1)
