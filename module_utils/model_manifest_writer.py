# -*- coding: utf-8 -*-
"""The manifest of a model folder, made from the folder (the sglang_model_manifest module; lab/install-standins.sh).

Every regular file below the folder is listed by its '/'-separated name, size and sha256, in the format
module_utils/model_manifest.py reads. The manifest's own file is left out when it lies inside the folder: a manifest
cannot hold its own sha256, and one that lists itself never verifies.

The folder is read through descriptors: each directory below it is opened relative to its parent without following
a symlink, each file opened with O_NOFOLLOW and O_NONBLOCK and checked with fstat before it is hashed. A symlink,
FIFO, socket or device below the folder is refused and named (the fetch copies regular files only), never followed
or read. The folder's own path may be a link: the operator names it. The manifest is written atomically
(module_utils/atomic_files.py), only when its text differs, and never over a manifest edited meanwhile.
"""
from __future__ import annotations

import hashlib
import os
import stat

from ansible.module_utils import atomic_files
from ansible.module_utils import model_manifest as mm
from ansible.module_utils import root_trust
from ansible.module_utils.model_manifest import ModelError

DEFAULT_NAME = "manifest.json"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
# How many refused entries one message names.
SHOWN = 20
KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"))


def _kind(mode):
    for test, name in KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _hash_fd(fd):
    digest, size = hashlib.sha256(), 0
    while True:
        chunk = os.read(fd, mm.HASH_CHUNK)
        if not chunk:
            return digest.hexdigest(), size
        digest.update(chunk)
        size += len(chunk)


def _file_entry(dirfd, entry, rel, info):
    """{name, size, sha256} of a regular file, or a refusal (str) naming what it turned out to be."""
    try:
        fd = os.open(entry, _FILE_FLAGS, dir_fd=dirfd)
    except OSError as exc:
        return "%s cannot be opened: %s" % (rel, exc.strerror or exc)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return "%s was replaced while it was read (now %s)" % (rel, "a file" if stat.S_ISREG(opened.st_mode)
                                                                   else _kind(opened.st_mode))
        digest, size = _hash_fd(fd)
        if size != os.fstat(fd).st_size:
            return "%s changed while it was hashed (%d bytes read, %d now)" % (rel, size, os.fstat(fd).st_size)
    except OSError as exc:
        return "%s cannot be read: %s" % (rel, exc.strerror or exc)
    finally:
        os.close(fd)
    return {"name": rel, "size": size, "sha256": digest}


def _walk(dirfd, prefix, skip, files, refused):
    for entry in sorted(os.listdir(dirfd)):
        rel = prefix + entry
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            refused.append("%r has a name that is not UTF-8 (a manifest is JSON text)" % rel)
            continue
        problem = mm.check_file_name(rel)
        if problem:
            refused.append("%r: its name %s" % (rel, problem))
            continue
        try:
            info = os.stat(entry, dir_fd=dirfd, follow_symlinks=False)
        except OSError as exc:
            refused.append("%s cannot be examined: %s" % (rel, exc.strerror or exc))
            continue
        if skip is not None and stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) == skip:
            continue
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(entry, dir_fd=dirfd)
            except OSError:
                target = "?"
            refused.append("%s is a symlink (to %s)" % (rel, target))
        elif stat.S_ISDIR(info.st_mode):
            try:
                fd = os.open(entry, _DIR_FLAGS | _NOFOLLOW, dir_fd=dirfd)
            except OSError as exc:
                refused.append("%s/ cannot be opened: %s" % (rel, exc.strerror or exc))
                continue
            try:
                _walk(fd, rel + "/", skip, files, refused)
            finally:
                os.close(fd)
        elif stat.S_ISREG(info.st_mode):
            found = _file_entry(dirfd, entry, rel, info)
            if isinstance(found, str):
                refused.append(found)
            else:
                files.append(found)
        else:
            refused.append("%s is %s" % (rel, _kind(info.st_mode)))


def scan(folder, skip=None):
    """The manifest's entries for every regular file below FOLDER, sorted by name; SKIP (device, inode) is a file
    left out (the manifest itself). ModelError names every entry that cannot be listed, or an empty folder."""
    try:
        top = os.open(folder, _DIR_FLAGS)
    except FileNotFoundError:
        raise ModelError("%s does not exist" % folder)
    except NotADirectoryError:
        raise ModelError("%s is not a directory (path is the model's folder)" % folder)
    except OSError as exc:
        raise ModelError("cannot open %s: %s" % (folder, exc.strerror or exc))
    files, refused = [], []
    try:
        _walk(top, "", skip, files, refused)
    finally:
        os.close(top)
    if refused:
        more = "; and %d more" % (len(refused) - SHOWN) if len(refused) > SHOWN else ""
        raise ModelError("%s holds what a manifest cannot list: %s%s. A manifest lists regular files only and this "
                         "module follows no link inside the folder: replace each with the file itself (or move it "
                         "out); nothing was written" % (folder, "; ".join(refused[:SHOWN]), more))
    if not files:
        raise ModelError("%s holds no file: a manifest lists at least one" % folder)
    return sorted(files, key=lambda entry: entry["name"])


def _read_dest(dest):
    """(bytes, identity) of the manifest already at DEST, (None, None) when there is none; ModelError for a link
    or anything but a regular file there (nothing is written through it)."""
    try:
        fd = os.open(dest, _FILE_FLAGS)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        if os.path.islink(dest):
            raise ModelError("dest %s is a symlink (to %s): the manifest is not written through a link; remove it or "
                             "give the real path" % (dest, os.readlink(dest)))
        raise ModelError("cannot read dest %s: %s" % (dest, exc.strerror or exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError("dest %s is %s, not a manifest file; nothing was written" % (dest, _kind(info.st_mode)))
        chunks = []
        while True:
            chunk = os.read(fd, mm.HASH_CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), atomic_files.identity(info)
    finally:
        os.close(fd)


def make(folder, dest=None, check_mode=False):
    """Write the manifest of FOLDER to DEST (default FOLDER/manifest.json) unless it already holds that text.

    Returns {changed, dest, files, total_bytes, manifest_sha256, before, after} (before: the old text, None for none;
    after: the new text). In check mode nothing is written. ModelError names what is wrong; nothing is written then."""
    if not isinstance(folder, str) or not os.path.isabs(folder):
        raise ModelError("path must be an absolute path to the model's folder, got %r" % (folder,))
    dest = dest or os.path.join(folder, DEFAULT_NAME)
    if not os.path.isabs(dest):
        raise ModelError("dest must be an absolute path, got %r" % (dest,))
    folder, dest = os.path.normpath(folder), os.path.normpath(dest)
    problem = root_trust.planted_link_problem(dest) if os.geteuid() == 0 else None
    if problem:
        raise ModelError("dest %s: %s; nothing was written" % (dest, problem))
    if not os.path.isdir(os.path.dirname(dest)):
        raise ModelError("dest %s: its directory %s does not exist" % (dest, os.path.dirname(dest)))
    old, ident = _read_dest(dest)
    skip = tuple(ident[:2]) if ident is not None else None
    files = scan(folder, skip)
    text = mm.manifest_text(files)
    data = text.encode("utf-8")
    before = None if old is None else old.decode("utf-8", "replace")
    result = {"changed": data != old, "dest": dest, "files": len(files), "total_bytes": mm.total_bytes(files),
              "manifest_sha256": mm.manifest_digest(files), "before": before, "after": text}
    if result["changed"] and not check_mode:
        try:
            atomic_files.write_atomic(dest, data, expect=old, ident=ident)
        except atomic_files.TransactionError as exc:
            raise ModelError("dest %s was not written: %s" % (dest, exc))
        except OSError as exc:
            raise ModelError("writing dest %s failed: %s (the old manifest, if any, is unchanged)"
                             % (dest, exc.strerror or exc))
    return result
