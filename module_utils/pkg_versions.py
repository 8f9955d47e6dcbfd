# -*- coding: utf-8 -*-
"""Read installed package versions from a virtualenv's metadata, never by import.

Importing sglang or flashinfer pulls in torch and CUDA; the controller, CI and
check-mode runs have neither. The dist-info METADATA files carry everything
we need.
"""
from __future__ import annotations

import glob
import os
import re

_PEP440 = re.compile(
    r"^\s*v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_l>a|b|rc|alpha|beta|c)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+(?P<local>[a-z0-9.]+))?\s*$",
    re.IGNORECASE,
)
_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


def version_key(text):
    """Sort key for a PEP 440 version (release, pre, post, dev); local labels ignored."""
    match = _PEP440.match(text or "")
    if not match:
        raise ValueError("not a PEP 440 version: %r" % (text,))
    release = [int(part) for part in match.group("release").split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    if match.group("pre_l"):
        pre = (_PRE_ORDER[match.group("pre_l").lower()], int(match.group("pre_n") or 0))
    elif match.group("dev") is not None and match.group("post") is None:
        pre = (-1, 0)  # 1.0.dev1 sorts before 1.0a1
    else:
        pre = (3, 0)
    post = int(match.group("post") or 0) if match.group("post") is not None else -1
    dev = int(match.group("dev") or 0) if match.group("dev") is not None else float("inf")
    return (tuple(release), pre, post, dev)


def version_lt(left, right):
    return version_key(left) < version_key(right)


def normalize_name(name):
    """PEP 503 name normalisation: flashinfer_python == flashinfer-python."""
    return re.sub(r"[-_.]+", "-", name).lower()


def site_packages_dirs(venv):
    """site-packages directories of a venv (lib and lib64, any Python 3.x)."""
    found = []
    for pattern in ("lib/python3*/site-packages", "lib64/python3*/site-packages"):
        for path in sorted(glob.glob(os.path.join(venv, pattern))):
            real = os.path.realpath(path)
            if os.path.isdir(real) and real not in [os.path.realpath(p) for p in found]:
                found.append(path)
    return found


def _read_metadata(path):
    name = version = None
    with open(path, "r", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                break  # headers end at the first blank line
            if line.startswith("Name:") and name is None:
                name = line.split(":", 1)[1].strip()
            elif line.startswith("Version:") and version is None:
                version = line.split(":", 1)[1].strip()
    return name, version


def installed_versions(site_packages):
    """Map normalised distribution name -> list of versions found in one site-packages."""
    versions = {}
    for meta in glob.glob(os.path.join(site_packages, "*.dist-info", "METADATA")):
        name, version = _read_metadata(meta)
        if name and version:
            versions.setdefault(normalize_name(name), []).append(version)
    return versions


def find_distribution(versions, name):
    """Installed version of one distribution, or None. Several copies: the highest wins."""
    found = versions.get(normalize_name(name)) or []
    if not found:
        return None
    return sorted(found, key=version_key)[-1]
