# -*- coding: utf-8 -*-
"""What gpu_preflight reads from a host besides its GPUs, as pure functions (library/gpu_host_facts.py runs them).

Each reads exactly what the shell and find tasks it replaces read, so the role's checks keep their meaning:
  - nvcc: the first line of ``nvcc --version`` with ``release X.Y``, the last such on that line
    (``sed -n 's/.*release \\([0-9][0-9.]*\\).*/\\1/p' | head -n 1``);
  - free disk: the nearest existing ancestor of a path (``while [ ! -e "$p" ]; do p=$(dirname "$p"); done``), then
    the space available to unprivileged users there, in KiB (``df -Pk`` column 4: f_bavail * f_frsize / 1024);
  - ACS: the ``ACSCtl:`` lines of ``lspci -vvv``, and among them those with ``ReqRedir+`` or ``CmpltRedir+``;
  - IOMMU groups: the directories right under /sys/kernel/iommu_groups (not symlinks, not hidden: the
    ``ansible.builtin.find`` task counted those).
"""
from __future__ import annotations

import os
import re
import stat

# Run by the target's Python for the venvs; prints e.g. 3.12.3.
PYTHON_VERSION_CODE = "import sys; print('%d.%d.%d' % sys.version_info[:3])"

_NVCC_RELEASE = re.compile(r".*release ([0-9][0-9.]*)")  # greedy .*: the last "release N" on a line, as sed's
_PYTHON_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_ACS_CONTROL = "ACSCtl:"
_REDIRECTING = re.compile(r"ReqRedir\+|CmpltRedir\+")


def nvcc_version(text):
    """The version in ``nvcc --version`` output ("12.8" of "Cuda compilation tools, release 12.8, V12.8.93");
    "" when no line says ``release <digit>``."""
    for line in (text or "").split("\n"):
        match = _NVCC_RELEASE.match(line)
        if match:
            return match.group(1)
    return ""


def python_version(rc, out, err):
    """(version, error) from running PYTHON_VERSION_CODE: ("3.12.3", None), or ("", why there is no version)."""
    if rc != 0:
        lines = (err or out or "").strip().splitlines()
        return "", "exits with rc %d%s" % (rc, ": " + lines[-1].strip() if lines else "")
    printed = (out or "").strip()
    if not _PYTHON_VERSION.match(printed):
        return "", "printed %r, not a version" % printed[:80]
    return printed, None


def posix_dirname(path):
    """dirname(1): "/a/b/" -> "/a", "a" -> ".", "/" -> "/", "" -> "." (os.path.dirname differs on the last three)."""
    stripped = path.rstrip("/")
    if not stripped:
        return "/" if path else "."
    if "/" not in stripped:
        return "."
    return stripped[:stripped.rindex("/")].rstrip("/") or "/"


def nearest_existing(path, exists=os.path.exists):
    """path itself if it exists, else its nearest existing ancestor (dirname(1) upwards; "/" and "." end it)."""
    current = path
    while not exists(current):
        parent = posix_dirname(current)
        if parent == current:  # "/" or "." missing: nothing above to try
            break
        current = parent
    return current


def free_kb(path, statvfs=os.statvfs):
    """KiB available to unprivileged users on the filesystem holding path (df -Pk's Available)."""
    info = statvfs(path)
    return info.f_bavail * info.f_frsize // 1024


def disk_free(path, exists=os.path.exists, statvfs=os.statvfs):
    """{path, checked_path, free_kb} for one path; OSError from statvfs is left to the caller."""
    checked = nearest_existing(path, exists)
    return {"path": path, "checked_path": checked, "free_kb": free_kb(checked, statvfs)}


def summarize_acs(lspci_output):
    """{lspci, ports_with_acs, ports_redirecting} from ``lspci -vvv`` output; None when lspci is not installed.

    A port counts once per ``ACSCtl:`` line; it redirects when that line has ReqRedir+ or CmpltRedir+ (the
    ACSCap: lines, which list what a port could do, are not counted)."""
    if lspci_output is None:
        return {"lspci": False, "ports_with_acs": 0, "ports_redirecting": 0}
    controls = [line for line in lspci_output.splitlines() if _ACS_CONTROL in line]
    return {"lspci": True, "ports_with_acs": len(controls),
            "ports_redirecting": len([line for line in controls if _REDIRECTING.search(line)])}


def count_iommu_groups(directory):
    """Directories right under directory (not symlinks, not names starting with "."); 0 when it is missing or
    unreadable (IOMMU off, or no /sys)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    count = 0
    for name in names:
        if name.startswith("."):
            continue
        try:
            if stat.S_ISDIR(os.lstat(os.path.join(directory, name)).st_mode):
                count += 1
        except OSError:
            continue
    return count
