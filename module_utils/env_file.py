# -*- coding: utf-8 -*-
"""An EnvironmentFile, checked line by line as systemd will read it, then written in one atomic step.

Every line is blank, a comment (``#`` or ``;``), or ``NAME=VALUE`` whose name and value pass unit_values'
env_name and env_value rules: what systemd reads is exactly what the role rendered. The file gets its owner, group
and mode before it replaces the old one, so no reader ever sees new content with old permissions.
"""
from __future__ import annotations

import os
import stat

from ansible.module_utils import atomic_files
from ansible.module_utils import path_state
from ansible.module_utils import root_trust
from ansible.module_utils import unit_values


class EnvFileError(Exception):
    """Content or a request that would not be written; the message says which line or setting."""


def problems(content, names=None):
    """One message per line that systemd would read differently from what it says; with NAMES (the variables the
    writer means to set), also per line that sets another (a value holding a line break writes one, e.g.
    ``LD_PRELOAD=``, and every line of it passes on its own)."""
    found, first = [], {}
    if names is not None and not (isinstance(names, list) and all(isinstance(item, str) for item in names)):
        return ["names must be a list of variable names (got %r)" % (names,)]
    if not isinstance(content, str):
        return ["content must be text (got %s)" % type(content).__name__]
    for number, line in enumerate(content.split("\n"), 1):
        # systemd skips only spaces and tabs before a name or a comment sign (and ends a line at a carriage
        # return): a line that is blank or a comment to Python's strip() but not to systemd is checked as a setting.
        if line.strip(" \t") == "":
            continue
        if line.lstrip(" \t").startswith(("#", ";")):
            found.extend("line %d: %s" % (number, error) for error in unit_values.comment("comment", line))
            continue
        name, sep, value = line.partition("=")
        if not sep:
            found.append("line %d is neither a comment nor NAME=VALUE (got %r)" % (number, line[:80]))
            continue
        label = "line %d (%s)" % (number, name[:40])
        found.extend(unit_values.env_name(label, name) or unit_values.env_value(label, value))
        if names is not None and name not in names:
            found.append("%s sets %s, which is not among the variables this file sets (%s): a value holding a line "
                         "break would write such a line" % (label, name[:40], ", ".join(sorted(names)) or "none"))
        if name in first:  # systemd keeps the last one: the earlier line would say what does not hold
            found.append("%s sets %s again (line %d set it first); systemd would keep the last" % (
                label, name, first[name]))
        first.setdefault(name, number)
    return found


def plan(dest, content, owner, group, mode, names=None):
    """{'content': bool, 'attributes': bool, 'before': text or None} for what differs; raises EnvFileError.

    NAMES: the variables the content may set (None: any)."""
    where = unit_values.path("dest", dest)  # also refuses a NUL byte or newline, which open() would not take
    if where:
        raise EnvFileError("; ".join(where))
    errors = problems(content, names)
    if errors:
        raise EnvFileError("%s refused, nothing written: %s" % (dest, "; ".join(errors)))
    problem = root_trust.planted_link_problem(dest) if os.geteuid() == 0 else None
    if problem:
        raise EnvFileError("%s; nothing was written" % problem)
    try:
        wanted_mode = path_state.parse_mode(dest, mode)
    except path_state.PathError as exc:
        raise EnvFileError(str(exc))
    try:
        found = os.lstat(dest)
    except FileNotFoundError:
        return {"content": True, "attributes": True, "before": None, "mode": wanted_mode,
                "before_bytes": None, "identity": None}
    if stat.S_ISLNK(found.st_mode):
        raise EnvFileError("%s is a symlink (to %s): an EnvironmentFile is written as a file of its own, never "
                           "through a link, and its owner and mode are not set on the link's target; replace the "
                           "link with the file itself, or point dest at the real file" % (dest, os.readlink(dest)))
    if not stat.S_ISREG(found.st_mode):
        raise EnvFileError("%s exists and is not a regular file" % dest)
    data, ident = atomic_files.read_snapshot(dest)
    before = data.decode("utf-8", errors="replace")
    uid, gid = path_state.owner_ids(owner, group)
    return {"content": before != content,
            "attributes": (uid, gid) != (found.st_uid, found.st_gid) or stat.S_IMODE(found.st_mode) != wanted_mode,
            "before": before, "mode": wanted_mode, "before_bytes": data, "identity": ident}


def apply(dest, content, owner, group, change):
    """Write the planned change: new content atomically with its attributes, or the attributes alone.

    Nothing goes through a symlink at DEST, and a file changed since plan() read it (another content, or another
    file) is left as it is: EnvFileError names it."""
    uid, gid = path_state.owner_ids(owner, group)
    if uid is None or gid is None:
        raise EnvFileError("%s: owner %s or group %s does not exist on this host" % (dest, owner, group))
    try:
        if change["content"]:
            atomic_files.write_atomic(dest, content.encode("utf-8"), root=os.path.dirname(dest),
                                      attributes=(change["mode"], uid, gid),
                                      expect=change.get("before_bytes", atomic_files.ANY),
                                      ident=change.get("identity"))
        elif change["attributes"]:
            atomic_files.set_owner_mode(dest, change["mode"], uid, gid, ident=change.get("identity"))
    except atomic_files.TransactionError as exc:
        raise EnvFileError("%s; nothing was changed" % exc)
