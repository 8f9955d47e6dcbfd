# -*- coding: utf-8 -*-
"""Every entry a user other than root can change among the paths root writes, reads to decide or executes, and
every folder above them up to ``/``: the audit a deployed host must pass (issue 47).

``root_trust`` answers one question before root runs something (the first problem is enough to refuse); this module
lists them all, each with its rule and who can write the entry, and is stricter:

- ``owner``: the entry is owned by a uid other than 0. Its owner can chmod it, so it can write it (a link's owner
  cannot re-point it, but is reported all the same: root's paths hold no one else's entries).
- ``group-writable``: the group write bit is set, whatever the group, gid 0 included (group root may have members
  other than root). A POSIX ACL that grants write to a named user or group shows here too: the group bits of the
  mode are the ACL's mask.
- ``other-writable``: the write bit for others is set. A sticky folder (``/tmp``) is refused too, as a parent or
  not: every user can create the names in it that root has not made yet.
- ``link-target``: a symbolic link (one listed, one on the way to a listed path, or one inside a tree) whose target,
  resolved, has an entry that one of the rules above finds, other than the folders above the link itself (those are
  the link's own findings). The target's findings come first, each with ``via`` naming the link. A link's own mode
  means nothing and is not checked.
- ``absent``: a listed path that does not exist (the folders above it that exist are still audited, since another
  user who can write one could create it).
- ``unexaminable``: an entry that cannot be ``lstat``-ed or a folder of a tree that cannot be listed.

Nothing is followed while walking: every entry is ``lstat``-ed (past a link on the way, the names below it are
examined where the link leads), and a link is audited as an entry and then through its target's own chain
(``realpath``: the roles execute ``/opt/sglang/current/bin/python`` through ``current`` and the venv's
``bin/python`` link). A tree is walked without following links; a link in it to a folder outside the tree
has its target's chain audited, not that folder's content (list the folder in ``trees`` for that). Each entry is
examined once and each finding reported once, in the order found.
"""
from __future__ import annotations

import errno
import grp
import os
import pwd
import stat

from ansible.module_utils import root_trust
from ansible.module_utils import safe_files

OWNER = "owner"
GROUP_WRITABLE = "group-writable"
OTHER_WRITABLE = "other-writable"
LINK_TARGET = "link-target"
ABSENT = "absent"
UNEXAMINABLE = "unexaminable"

_ACL_XATTR = "system.posix_acl_access"


def _user(uid):
    try:
        return "uid %d (%s)" % (uid, pwd.getpwuid(uid).pw_name)
    except KeyError:
        return "uid %d" % uid


def _group(gid):
    try:
        return "gid %d (%s)" % (gid, grp.getgrgid(gid).gr_name)
    except KeyError:
        return "gid %d" % gid


def _has_acl(path):
    try:
        return bool(os.getxattr(path, _ACL_XATTR, follow_symlinks=False))
    except (OSError, AttributeError):
        return False


def finding(path, rule, writers, detail):
    """One finding: the entry, the rule it breaks, who besides root can write it, and what was seen."""
    found = {"path": path, "rule": rule, "writers": writers, "detail": detail}
    return found


def entry_findings(path, info):
    """The findings of one entry from its lstat result INFO (none when only root can change it)."""
    found = []
    kind = safe_files.kind_of(info.st_mode)
    if info.st_uid != 0:
        found.append(finding(path, OWNER, [_user(info.st_uid)], "%s owned by %s" % (kind, _user(info.st_uid))))
    if stat.S_ISLNK(info.st_mode):
        return found
    mode = stat.S_IMODE(info.st_mode)
    if mode & stat.S_IWGRP:
        writers = ["members of group %s" % _group(info.st_gid)]
        if _has_acl(path):
            writers.append("users and groups its ACL names")
        found.append(finding(path, GROUP_WRITABLE, writers, "%s of mode %04o, group %s"
                             % (kind, mode, _group(info.st_gid))))
    if mode & stat.S_IWOTH:
        sticky = " (sticky: every user can still add entries)" if stat.S_ISDIR(info.st_mode) and mode & stat.S_ISVTX \
            else ""
        found.append(finding(path, OTHER_WRITABLE, ["every user"], "%s of mode %04o%s" % (kind, mode, sticky)))
    return found


def describe(found):
    """One line for a finding."""
    line = "%s: %s (%s)" % (found["path"], found["rule"], found["detail"])
    if found["writers"]:
        line += ", writable by %s" % ", ".join(found["writers"])
    if found.get("via"):
        line += ", reached through the link %s" % found["via"]
    return line


class Audit(object):
    """Collects the findings of every path and tree given to it; each entry is examined once."""

    def __init__(self):
        self._entries = {}  # path -> (lstat result or None, its own findings)
        self._links = {}  # link path -> the findings of its target's chain
        self._reported = set()
        self.findings = []

    @property
    def audited(self):
        """How many entries were examined."""
        return len(self._entries)

    def _report(self, found):
        for item in found:
            key = (item["path"], item["rule"])
            if key not in self._reported:
                self._reported.add(key)
                self.findings.append(item)

    def _entry(self, path):
        """(lstat result, findings) of PATH; the result is None when it does not exist (no finding then)."""
        if path not in self._entries:
            try:
                info = os.lstat(path)
                found = entry_findings(path, info)
            except OSError as exc:
                info = None
                found = [] if exc.errno in (errno.ENOENT, errno.ENOTDIR) else [
                    finding(path, UNEXAMINABLE, [], "lstat failed: %s" % exc.strerror)]
            self._entries[path] = (info, found)
        return self._entries[path]

    def _link(self, path):
        """The findings of the chain the link at PATH resolves to (each with ``via``), then one naming the link when
        there are any."""
        if path not in self._links:
            self._links[path] = []  # a loop of links comes back here: nothing more to add
            target = os.path.realpath(path)
            found = [dict(item, via=item.get("via", path)) for item in self._chain(target, absent_ok=True)]
            # the folders above the link are its own chain's findings; the link is named for what lies beyond them
            above = set(root_trust.chain_paths(path)[:-1])
            beyond = [item for item in found if item["path"] not in above]
            if beyond:
                writers = []
                for item in beyond:
                    writers += [who for who in item["writers"] if who not in writers]
                found = found + [finding(path, LINK_TARGET, writers, "a symbolic link to %s (%s), which a user "
                                         "other than root can change" % (os.readlink(path), target))]
            self._links[path] = found
        return self._links[path]

    def _chain(self, path, absent_ok):
        """Findings of ``/`` and every folder down to PATH, PATH included, and of every link's target on the way;
        an ``absent`` finding for PATH when part of it does not exist, unless ABSENT_OK."""
        found = []
        for shown in root_trust.chain_paths(path):
            info, own = self._entry(shown)
            found += own
            if info is None:
                if not own and not absent_ok:
                    found.append(finding(path, ABSENT, [], "%s does not exist" % shown))
                break
            if stat.S_ISLNK(info.st_mode):
                found += self._link(shown)
        return found

    def path(self, path, absent_ok=False):
        """Audit PATH and every folder above it (and every link's target on the way)."""
        self._report(self._chain(path, absent_ok))

    def tree(self, root, absent_ok=False):
        """Audit ROOT as a path, then every entry below it, without following links (a link's target chain is
        audited)."""
        self.path(root, absent_ok)
        errors = []
        for directory, dirs, files in os.walk(root, onerror=errors.append):
            for name in sorted(dirs + files):
                entry = os.path.join(directory, name)
                info, own = self._entry(entry)
                self._report(own)
                if info is not None and stat.S_ISLNK(info.st_mode):
                    self._report(self._link(entry))
        self._report([finding(exc.filename, UNEXAMINABLE, [], "cannot be listed: %s" % exc.strerror)
                      for exc in errors if exc.filename and os.path.lexists(exc.filename)])


def audit(paths=(), trees=(), optional_paths=()):
    """(findings, entries audited) for PATHS (each with every folder above it), OPTIONAL_PATHS (the same, no
    finding when absent) and TREES (folders audited whole)."""
    run = Audit()
    for path in paths:
        run.path(path)
    for path in optional_paths:
        run.path(path, absent_ok=True)
    for root in trees:
        run.tree(root)
    return run.findings, run.audited
