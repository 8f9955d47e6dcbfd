# -*- coding: utf-8 -*-
"""Validate NCCL settings for one venv and deliver them, or refuse and write nothing."""
from __future__ import annotations

import os

from ansible.module_utils import atomic_files as af
from ansible.module_utils import nccl_delivery as nd
from ansible.module_utils import nccl_settings as ns
from ansible.module_utils import pkg_versions as pv
from ansible.module_utils import sglang_env_overrides as so

NCCL_DISTRIBUTIONS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")


class Refused(Exception):
    def __init__(self, msg, result):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result


def site_packages(venv):
    found = pv.site_packages_dirs(venv)
    if not found:
        raise Refused("%s is not a venv (no lib/python3*/site-packages)" % venv, {})
    return found[0]


def inspect_venv(site):
    """NCCL version (from the nvidia-nccl-* wheel's metadata) and SGLang's own start-up overrides."""
    versions = pv.installed_versions(site)
    nccl = None
    for name in NCCL_DISTRIBUTIONS:
        nccl = pv.find_distribution(versions, name)
        if nccl:
            break
    engine = os.path.join(site, so.ENGINE)
    overrides = so.overrides(af.read_bytes(engine)) if os.path.isfile(engine) else {}
    return nccl, overrides, pv.find_distribution(versions, "sglang")


def choose_profile(profile, gpu_facts):
    if profile != "auto":
        return profile
    return "nvlink" if gpu_facts.get("nvlink") else "pcie"


def plan(venv, profile="auto", gpu_facts=None, settings=None, release_policy="warn",
         env_file="/etc/sglang/nccl.env", hook_name="sglang_nccl_env"):
    """Validate; returns (result, [(path, old or None, new)]) or raises Refused."""
    gpu_facts = gpu_facts or {}
    site = site_packages(venv)
    nccl, overrides, sglang = inspect_venv(site)
    chosen = choose_profile(profile, gpu_facts)
    effective, notes = ns.profile_settings(chosen, gpu_facts)
    effective.update(ns.normalize(settings))
    ctx = ns.Context(nccl_version=nccl, nvlink=bool(gpu_facts.get("nvlink")),
                     gpu_count=gpu_facts.get("gpu_count"), sglang_overrides=overrides)
    errors, warnings = ns.validate({k: v["value"] for k, v in effective.items()}, ctx)
    release = ns.release_problems(ctx)
    if release_policy == "fail":
        errors += release
    else:
        warnings += release
    if nccl is None:
        warnings.append("no nvidia-nccl-* package in %s: NCCL's version is unknown, version checks skipped" % site)
    hook_py = os.path.join(site, hook_name + ".py")
    hook_pth = os.path.join(site, hook_name + ".pth")
    result = {
        "changed": False, "profile": chosen, "settings": effective, "notes": notes, "warnings": warnings,
        "nccl_version": nccl, "sglang_version": sglang, "sglang_overrides": overrides,
        "files": [hook_py, hook_pth, env_file],
    }
    if errors:
        raise Refused("NCCL settings refused, nothing written: " + "; ".join(errors), dict(result, errors=errors))
    wanted = [
        (hook_py, nd.hook_module(effective, env_file)),
        (hook_pth, nd.hook_pth(hook_name)),
        (env_file, nd.env_file(effective, hook_py)),
    ]
    changes = []
    for path, new in wanted:
        old = af.read_bytes(path) if os.path.exists(path) else None
        if old != new:
            changes.append((path, old, new))
    return result, changes


def removal(venv, env_file="/etc/sglang/nccl.env", hook_name="sglang_nccl_env"):
    """Files to remove for state=absent (the ones that exist)."""
    site = site_packages(venv)
    paths = [os.path.join(site, hook_name + ".pth"), os.path.join(site, hook_name + ".py"), env_file]
    return [path for path in paths if os.path.exists(path)]


def diff_entries(changes):
    return [{"before_header": path, "after_header": path,
             "before": (old or b"").decode("utf-8", "replace"), "after": new.decode("utf-8", "replace")}
            for path, old, new in changes]
