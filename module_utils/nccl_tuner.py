# -*- coding: utf-8 -*-
"""Validate NCCL settings for one venv and deliver them, or refuse and write nothing."""
from __future__ import annotations

import json
import os
import stat
import sys

from ansible.module_utils import atomic_files as af
from ansible.module_utils import nccl_delivery as nd
from ansible.module_utils import nccl_settings as ns
from ansible.module_utils import pkg_versions as pv
from ansible.module_utils import sglang_env_overrides as so
from ansible.module_utils import unit_values as uv

# Every file delivered is root's and read-only for others, enforced on every run (a hook that is writable by
# anyone is code that root's Python imports).
FILE_MODE = 0o644
DIR_MODE = 0o755

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
    try:
        overrides = so.overrides(af.read_bytes(engine)) if os.path.isfile(engine) else {}
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
        raise Refused("NCCL settings refused, nothing written: %s cannot be parsed (%s), so the settings SGLang "
                      "overrides at start-up are unknown; run the module with the venv's own Python "
                      "(ansible_python_interpreter) if it is newer than this one" % (engine, exc), {})
    return nccl, overrides, pv.find_distribution(versions, "sglang")


def foreign_hooks(site, hook_name):
    """The hook's two files that exist without this role's header: another package's module or start-up file
    (hook_name "typing_extensions" would replace, and state=absent delete, typing_extensions.py)."""
    hook_py, hook_pth = os.path.join(site, hook_name + ".py"), os.path.join(site, hook_name + ".pth")
    found = [path for path, ours in ((hook_py, lambda data: nd.HEADER.encode("utf-8") in data),
                                     (hook_pth, lambda data: data == nd.hook_pth(hook_name)))
             if os.path.isfile(path) and not ours(af.read_bytes(path))]
    if found:
        errors = ["%s exists and was not written by this role: hook_name %s names another package's file; choose "
                  "another name" % (path, hook_name) for path in found]
        raise Refused("NCCL settings refused, nothing written: " + "; ".join(errors), {"errors": errors})


# What a module file or package in a search path directory is named after (name.py, name/, name.cpython-311-....so).
_MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")


def top_level_names(directory):
    """{module name: where} importable from one sys.path directory: modules, packages and extension modules found
    there, and the names installed distributions declare (top_level.txt). Unreadable: empty."""
    found = {}
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return found
    for entry in entries:
        path = os.path.join(directory, entry)
        if entry.endswith((".dist-info", ".egg-info")):
            top_level = os.path.join(path, "top_level.txt")
            if os.path.isfile(top_level):
                try:
                    names = af.read_bytes(top_level).decode("utf-8", "replace").split()
                except OSError:
                    names = []
                for name in names:
                    found.setdefault(name.split("/")[0], "%s (top_level.txt)" % path)
            continue
        if os.path.isdir(path):
            if entry.isidentifier() and entry != "__pycache__":
                found.setdefault(entry, path)
            continue
        for suffix in _MODULE_SUFFIXES:
            if entry.endswith(suffix):
                found.setdefault(entry.split(".", 1)[0], path)
                break
    return found


def search_dirs(site):
    """The venv's site-packages and the directories its .pth files add (sglang_install's base interpreter's, an
    editable install's): every place an installed module the hook could shadow, or be shadowed by, lives."""
    dirs = [site]
    try:
        pth_files = sorted(entry for entry in os.listdir(site) if entry.endswith(".pth"))
    except OSError:
        return dirs
    for entry in pth_files:
        if not os.path.isfile(os.path.join(site, entry)):
            continue  # a FIFO would hang the read: only regular .pth files are read for the folders they add
        try:
            lines = af.read_bytes(os.path.join(site, entry)).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if line.startswith("/") and os.path.isdir(line) and line not in dirs:
                dirs.append(line)
    return dirs


def shadow_problems(hook_name, stdlib_names, installed, own=()):
    """Why HOOK_NAME cannot be the hook's module name, or []. STDLIB_NAMES: the venv's Python's standard library
    (sys.stdlib_module_names); INSTALLED: {name: where} of the venv's importable modules; OWN: the paths that are
    the hook's own files (a re-run finds them)."""
    if hook_name in ("sitecustomize", "usercustomize"):
        return ["hook_name %s is the name site imports for its own customization: the first one on sys.path wins "
                "(Ubuntu ships a sitecustomize in the standard library's directory), so the hook may never run; "
                "choose another name (sglang_layout_nccl_hook)" % hook_name]
    if hook_name in stdlib_names:
        return ["hook_name %s is a module of the venv's Python's standard library: the standard library comes first "
                "on sys.path, so the hook's import would load that module and the hook would never run; choose "
                "another name (sglang_layout_nccl_hook)" % hook_name]
    where = installed.get(hook_name)
    if where and where not in own:
        return ["hook_name %s is already an installed module of the venv (%s): the hook would shadow it, or never "
                "run; choose another name (sglang_layout_nccl_hook)" % (hook_name, where)]
    return []


# Run by the venv's own Python, isolated and without site (no .pth of the venv runs, the hook included): the
# standard library the hook's import competes with is that interpreter's, not the module's.
STDLIB_QUERY = "import json, sys; print(json.dumps(sorted(getattr(sys, 'stdlib_module_names', ()))))"


def stdlib_names_from(rc, out):
    """The names STDLIB_QUERY printed, or None (it failed, or the Python is older than 3.10 and has no list)."""
    if rc != 0:
        return None
    try:
        names = json.loads(out)
    except ValueError:
        return None
    if not isinstance(names, list) or not names or not all(isinstance(name, str) for name in names):
        return None
    return names


def check_hook_name(site, hook_name, stdlib_names=None):
    """Refuse a hook module name that the venv's Python already imports as something else."""
    if stdlib_names is None:
        stdlib_names = getattr(sys, "stdlib_module_names", sys.builtin_module_names)
    installed = {}
    for directory in search_dirs(site):
        for name, where in top_level_names(directory).items():
            installed.setdefault(name, where)
    hook_py = os.path.join(site, hook_name + ".py")
    # The hook's own module (a re-run); a foreign one of that name is refused by foreign_hooks, and here.
    own = [hook_py] if os.path.isfile(hook_py) and nd.HEADER.encode("utf-8") in af.read_bytes(hook_py) else []
    errors = shadow_problems(hook_name, set(stdlib_names), installed, own)
    if errors:
        raise Refused("NCCL settings refused, nothing written: " + "; ".join(errors), {"errors": errors})


def check_locations(env_file, hook_name):
    """Refuse, before anything is read or written, file and module names that would land elsewhere."""
    errors = uv.path("env_file", env_file) + uv.identifier("hook_name", hook_name)
    if not errors and os.path.isdir(env_file):
        errors.append("env_file %s is a directory; it must name the EnvironmentFile itself" % env_file)
    if not errors and os.path.exists(os.path.dirname(env_file)) and not os.path.isdir(os.path.dirname(env_file)):
        errors.append("env_file %s: %s is not a directory" % (env_file, os.path.dirname(env_file)))
    if errors:
        raise Refused("NCCL settings refused, nothing written: " + "; ".join(errors), {"errors": errors})


def check_gpu_facts(gpu_facts):
    """The shape of the nvidia_gpu facts the profile reads; a message instead of a traceback."""
    if not isinstance(gpu_facts, dict):
        return ["gpu_facts must be a mapping (the nvidia_gpu facts), got %s" % type(gpu_facts).__name__]
    topology = gpu_facts.get("topology")
    if topology in (None, {}):
        return []
    if not isinstance(topology, dict):
        return ["gpu_facts.topology must be a mapping, got %s" % type(topology).__name__]
    gpus, matrix = topology.get("gpus", []), topology.get("matrix", {})
    if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
        return ["gpu_facts.topology.gpus must be a list of GPU labels (GPU0, GPU1, ...)"]
    if not isinstance(matrix, dict) or not all(isinstance(row, dict) and all(isinstance(v, str) for v in row.values())
                                               for row in matrix.values()):
        return ["gpu_facts.topology.matrix must map each GPU label to {GPU label: link type}"]
    return []


def check_settings(settings):
    """Names and values as they will be written to the EnvironmentFile and the hook (no injection, no quoting)."""
    if not isinstance(settings, dict):
        return ["settings must be a mapping of NAME: value"]
    errors = []
    for name in sorted(settings, key=str):
        spec = settings[name]
        errors += uv.env_name("the settings name %r" % (name,), name)
        value = spec.get("value") if isinstance(spec, dict) else spec
        if isinstance(spec, dict) and spec.get("reason") is not None:
            errors += uv.comment("%s.reason" % name, spec["reason"])
        if value is not None and not (isinstance(value, str) and value.strip() == ""):
            errors += uv.env_value(str(name), value)
    return errors


def link_problems(venv, paths):
    """Messages for delivered files reached through a symlink: the hook's files through any link below the venv
    (site-packages included), the EnvironmentFile when it is one itself (its directory is the operator's)."""
    found = []
    for path in paths:
        if path.endswith((".py", ".pth")) and not os.path.relpath(path, venv).startswith(os.pardir):
            found.append(af.link_problem(venv, path))
        else:
            found.append(af.link_problem(os.path.dirname(path), path))
    return [problem for problem in found if problem]


def special_files(paths):
    """Messages for delivered files there as something else than a regular file or a link (links: link_problems):
    a FIFO would hang the read that plans the change or the diff, a device is never opened."""
    found = []
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError:
            continue  # absent (or its folder is not one: check_locations names that)
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            found.append("%s is %s, not a regular file: it is never opened; remove it" % (
                path, "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
                else "a special file"))
    return found


def write_roots(venv, paths):
    """{path: the directory below which replace_all follows no symlink} for the delivered files."""
    return {path: venv if path.endswith((".py", ".pth")) and not os.path.relpath(path, venv).startswith(os.pardir)
            else os.path.dirname(path) for path in paths}


def mode_problems(paths, uid=None, gid=None):
    """Delivered files whose mode or owner differs from what is enforced (read with lstat: a link's target is not
    looked at, and a link is not a delivered file)."""
    uid = os.geteuid() if uid is None else uid
    gid = os.getegid() if gid is None else gid
    found = []
    for path in paths:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o7777 != FILE_MODE or (
                os.geteuid() == 0 and (info.st_uid, info.st_gid) != (uid, gid)):
            found.append(path)
    return found


def enforce_modes(paths):
    """0644 and root's on each file, set on a descriptor opened without following a symlink: a link put in a
    file's place is refused (af.UnsafePath, naming it), its target never changes mode or owner."""
    for path in paths:
        if os.geteuid() == 0:
            af.set_owner_mode(path, FILE_MODE, 0, 0)
        else:
            af.set_owner_mode(path, FILE_MODE)


def choose_profile(profile, gpu_facts):
    if profile != "auto":
        return profile
    return "nvlink" if gpu_facts.get("nvlink") else "pcie"


def server_nccl(server_environment):
    """The NCCL_* variables the server gets from its other environment (runtime.env: sglang_install_environment)."""
    return {name: value for name, value in (server_environment or {}).items() if str(name).startswith("NCCL_")}


def conflicts(inherited, effective):
    """A message for each inherited variable this role also sets to another value (the unit's later file would
    win unseen)."""
    return ["%s is %s in the server's runtime environment (sglang_install_environment) and %s here: set it in "
            "one place" % (name, inherited[name], effective[name]["value"])
            for name in sorted(inherited)
            if name in effective and str(effective[name]["value"]) != str(inherited[name])]


def plan(venv, profile="auto", gpu_facts=None, settings=None, release_policy="warn",
         env_file="/etc/sglang/nccl.env", hook_name="sglang_nccl_env", server_environment=None, stdlib_names=None):
    """Validate; returns (result, [(path, old or None, new)]) or raises Refused.

    ``server_environment``: the server's other environment; its NCCL_* variables reach the same processes, so
    they are validated with this role's settings (not written here). ``stdlib_names``: the venv's Python's
    sys.stdlib_module_names (None: this interpreter's)."""
    check_locations(env_file, hook_name)
    gpu_facts = {} if gpu_facts is None else gpu_facts
    if not isinstance(server_environment or {}, dict):
        raise Refused("NCCL settings refused, nothing written: server_environment must be a mapping", {})
    inherited = server_nccl(server_environment)
    shape = check_gpu_facts(gpu_facts) + check_settings(settings or {}) + check_settings(inherited)
    if shape:
        raise Refused("NCCL settings refused, nothing written: " + "; ".join(shape), {"errors": shape})
    site = site_packages(venv)
    delivered = [os.path.join(site, hook_name + ".py"), os.path.join(site, hook_name + ".pth"), env_file]
    links = link_problems(venv, delivered) or special_files(delivered)
    if links:
        raise Refused("NCCL settings refused, nothing written: " + "; ".join(links), {"errors": links})
    foreign_hooks(site, hook_name)
    check_hook_name(site, hook_name, stdlib_names)
    nccl, overrides, sglang = inspect_venv(site)
    chosen = choose_profile(profile, gpu_facts)
    effective, notes = ns.profile_settings(chosen, gpu_facts)
    effective.update(ns.normalize(settings))
    ctx = ns.Context(nccl_version=nccl, nvlink=bool(gpu_facts.get("nvlink")),
                     gpu_count=gpu_facts.get("gpu_count"), sglang_overrides=overrides)
    values = dict({name: str(value) for name, value in inherited.items()},
                  **{k: v["value"] for k, v in effective.items()})
    errors, warnings = ns.validate(values, ctx)
    errors = conflicts(inherited, effective) + errors
    if errors and set(inherited) - set(effective):
        errors.append("checked with them: %s from the server's runtime environment (sglang_install_environment)"
                      % ", ".join(sorted(set(inherited) - set(effective))))
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
    check_locations(env_file, hook_name)
    site = site_packages(venv)
    paths = [os.path.join(site, hook_name + ".pth"), os.path.join(site, hook_name + ".py"), env_file]
    errors = link_problems(venv, paths) or special_files(paths)
    if errors:
        raise Refused("NCCL settings not removed, nothing removed: " + "; ".join(errors), {"errors": errors})
    foreign_hooks(site, hook_name)
    return [path for path in paths if os.path.exists(path)]


def diff_entries(changes):
    return [{"before_header": path, "after_header": path,
             "before": (old or b"").decode("utf-8", "replace"), "after": new.decode("utf-8", "replace")}
            for path, old, new in changes]
