# -*- coding: utf-8 -*-
"""Apply or revert the SM120 fusion-guard patch in one virtualenv.

Everything the Ansible module does, minus Ansible: it is importable and unit
tested on its own. Refusals raise ``PatchRefused`` before anything is written.

What this keeps (``<venv>/.sglang-fusion-patch/``):
  state.json                  per patched file: sha256 before/after, SGLang version
  originals/<sha256>          exact pre-patch bytes, named by their hash
so ``state: absent`` restores byte-identical originals, and only where the
file still holds exactly what this module wrote.

Every file it writes stays inside the venv (or the ``site_packages`` it was
given): a symlink anywhere below it on the way to a file it would write, the
file itself included, is refused before anything is written, in check mode
too, naming the link (atomic_files.link_problem; the writes themselves go
through directories opened without following links). A symlinked guard file is
therefore never patched, so it never becomes a regular file and ``absent`` has
nothing to restore but exact bytes. A guard file edited after it was read is
not overwritten: the rename re-checks its bytes and identity and the run fails
naming it, the files already replaced get their old bytes back and nothing is
recorded.
"""
from __future__ import annotations

import datetime
import glob
import json
import os
import re
import shutil
import stat

from ansible.module_utils import atomic_files as af
from ansible.module_utils import fusion_guards as fg
from ansible.module_utils import pkg_versions as pv

MIN_FLASHINFER = "0.6.17"
STATE_DIR_NAME = ".sglang-fusion-patch"
EMPTY_KERNEL_WHY = (
    "flashinfer-python releases before 0.6.17 build the trtllm allreduce-fusion kernels only for "
    "SM90/SM100: on SM120 the one-shot Lamport kernel is compiled with an empty body and returns "
    "garbage without any error (flashinfer PR #3903)")


class PatchRefused(Exception):
    """Nothing was written. ``result`` holds what was learnt before refusing."""

    def __init__(self, msg, result=None):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result or {}


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Venv(object):
    """The venv, its site-packages that hold sglang, and the versions in it."""

    def __init__(self, venv, site_packages=None):
        self.venv = os.path.abspath(venv)
        if not os.path.isdir(self.venv):
            raise PatchRefused("venv %s does not exist" % self.venv)
        candidates = [site_packages] if site_packages else pv.site_packages_dirs(self.venv)
        self.site_packages = None
        for path in candidates:
            if os.path.isdir(os.path.join(path, "sglang")):
                self.site_packages = path
                break
        looked = ", ".join(candidates) or os.path.join(self.venv, "lib/python3*/site-packages")
        if self.site_packages is None:
            raise PatchRefused("sglang is not installed in venv %s: no sglang/ package in %s" % (
                self.venv, looked))
        self.versions = pv.installed_versions(self.site_packages)
        self.sglang_version = pv.find_distribution(self.versions, "sglang")
        if self.sglang_version is None:
            raise PatchRefused("sglang package found in %s but no sglang-*.dist-info metadata: cannot tell "
                               "its version, refusing to guess its guard layout" % self.site_packages)
        self.flashinfer_version = pv.find_distribution(self.versions, "flashinfer-python")
        self.root = self.site_packages  # guard paths are relative to it (sglang/srt/...)
        self.state_dir = os.path.join(self.venv, STATE_DIR_NAME)
        # Guard files are written through no symlink below this: the venv itself where site-packages was found in
        # it (lib/python3.X/site-packages/... included), the given site-packages otherwise.
        self.write_root = self.venv if site_packages is None else os.path.abspath(site_packages)

    def path(self, rel):
        return os.path.join(self.root, rel)

    def python(self):
        for name in ("python3", "python"):
            candidate = os.path.join(self.venv, "bin", name)
            if os.access(candidate, os.X_OK):
                return candidate
        return None


def read_guard_files(venv, identities=None):
    """{rel: bytes} of the guard files there are; IDENTITIES (a dict), when given, gets each one's identity as read,
    which the rename re-checks."""
    files = {}
    for rel in fg.G1_FILES + (fg.FUSION_FILE,):
        if os.path.isfile(venv.path(rel)):
            files[rel], ident = af.read_snapshot(venv.path(rel))
            if identities is not None:
                identities[venv.path(rel)] = ident
    return files


def link_problems(venv, rels):
    """Messages for each write this run would make through a symlink: the guard files RELS and the record."""
    found = [af.link_problem(venv.write_root, venv.path(rel)) for rel in sorted(rels)]
    found += state_link_problems(venv)
    return [problem for problem in found if problem]


def state_link_problems(venv):
    found = [af.link_problem(venv.venv, os.path.join(venv.state_dir, name)) for name in ("state.json", "originals/x")]
    return [problem for problem in found if problem]


_DEFINES = {
    "is_sm120_supported": re.compile(rb"^(?:def\s+is_sm120_supported\b|is_sm120_supported\s*=)", re.M),
    "is_sm120": re.compile(rb"\bis_sm120\b"),
}


def sm120_helpers(venv):
    """Which SM120 helpers this SGLang defines (checked in its source, not imported)."""
    found = {}
    for name, places in fg.SM120_HELPER_SOURCES.items():
        found[name] = False
        for rel in places:
            full = venv.path(rel)
            paths = glob.glob(os.path.join(full, "*.py")) if os.path.isdir(full) else [full]
            for path in paths:
                if os.path.isfile(path) and _DEFINES[name].search(af.read_bytes(path)):
                    found[name] = True
    return found


def _server_arg_sources(venv):
    """(path, bytes) of the files SGLang declares its server flags in: server_args.py, arg_groups/fields/*.py."""
    paths = [venv.path("sglang/srt/server_args.py")]
    paths += sorted(glob.glob(venv.path("sglang/srt/arg_groups/fields/*.py")))
    return [(p, af.read_bytes(p)) for p in paths if os.path.isfile(p)]


def server_flag_for(venv):
    return fg.server_flag(_server_arg_sources(venv))


def server_no_fusion_flag_for(venv):
    return fg.server_no_fusion_flag(_server_arg_sources(venv))


def load_state(state_dir):
    """The patch record; a record that is not JSON or not of its shape is refused, naming the file."""
    path = os.path.join(state_dir, "state.json")
    how = "it records which files this module changed and their original bytes; restore it from a backup, or " \
          "reinstall the venv (sglang_install) and remove %s" % state_dir
    try:  # a regular file only: a link in its place is not followed, a FIFO not opened (it would hang the run)
        text = af.read_record(path)
    except af.RecordError as exc:
        if isinstance(exc.__context__, UnicodeDecodeError):
            raise PatchRefused("%s is corrupt (not JSON: %s); nothing was changed: %s" % (path, exc, how))
        raise PatchRefused("%s; nothing was changed" % exc)
    except OSError as exc:
        raise PatchRefused("%s cannot be read (%s); nothing was changed" % (path, exc))
    if text is None:
        return {"version": 1, "files": {}}
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise PatchRefused("%s is corrupt (not JSON: %s); nothing was changed: %s" % (path, exc, how))
    problem = _state_shape_problem(state)
    if problem:
        raise PatchRefused("%s has the wrong shape (%s); nothing was changed: %s" % (path, problem, how))
    state.setdefault("files", {})
    return state


def _state_shape_problem(state):
    if not isinstance(state, dict):
        return "a JSON object was expected, found %s" % type(state).__name__
    files = state.get("files", {})
    if not isinstance(files, dict):
        return "'files' must map file paths to records, found %s" % type(files).__name__
    for rel, record in files.items():
        if not isinstance(record, dict):
            return "the record of %s is not an object" % rel
        for key in ("sha256_before", "sha256_after"):
            value = record.get(key)
            if not isinstance(value, str) or not re.match(r"^[0-9a-f]{64}$", value):
                return "the record of %s has no valid %s" % (rel, key)
        if os.path.isabs(rel) or ".." in rel.split("/"):
            return "the record names %s, which is not a path inside the venv" % rel
    return None


def _venv_of(state_dir):
    return os.path.dirname(os.path.abspath(state_dir))


def save_state(state_dir, state):
    if not os.path.lexists(state_dir):
        os.makedirs(state_dir, mode=0o755)
    data = json.dumps(state, indent=2, sort_keys=True).encode("utf-8") + b"\n"
    af.write_atomic(os.path.join(state_dir, "state.json"), data, root=_venv_of(state_dir))


def keep_original(state_dir, data):
    """Store pre-patch bytes under their own hash; returns the path."""
    directory = os.path.join(state_dir, "originals")
    if not os.path.lexists(directory):
        os.makedirs(directory, mode=0o755)
    path = os.path.join(directory, af.sha256_bytes(data))
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    # Hashed only when it is a regular file (a FIFO would hang the read); anything else is replaced by the rename,
    # or refused by write_atomic when it is a link.
    if info is None or not stat.S_ISREG(info.st_mode) or af.sha256_file(path) != af.sha256_bytes(data):
        af.write_atomic(path, data, root=_venv_of(state_dir))
    return path


def _diff(rel, root, before, after):
    return {
        "before_header": os.path.join(root, rel) + " (before)",
        "after_header": os.path.join(root, rel) + " (after)",
        "before": before.decode("utf-8", "replace"),
        "after": after.decode("utf-8", "replace"),
    }


def _base_result(venv):
    sources = _server_arg_sources(venv)
    return {
        "changed": False,
        "venv": venv.venv,
        "site_packages": venv.site_packages,
        "sglang_version": venv.sglang_version,
        "flashinfer_version": venv.flashinfer_version,
        "state_file": os.path.join(venv.state_dir, "state.json"),
        "server_flag": fg.server_flag(sources),
        "server_no_fusion_flag": fg.server_no_fusion_flag(sources),
        "layout": None,
        "sites": [],
        "files": [],
        "backup_files": [],
        "diff": [],
    }


def check_flashinfer(venv, minimum, result):
    if pv.version_lt(minimum, MIN_FLASHINFER):
        raise PatchRefused("min_flashinfer_version %s is below %s, which no setting can lower: %s" % (
            minimum, MIN_FLASHINFER, EMPTY_KERNEL_WHY), result)
    if venv.flashinfer_version is None:
        raise PatchRefused("flashinfer-python is not installed in %s (no flashinfer_python-*.dist-info): "
                           "the fused kernel comes from it; install flashinfer-python >= %s first" % (
                               venv.site_packages, minimum), result)
    if pv.version_lt(venv.flashinfer_version, minimum):
        raise PatchRefused("flashinfer-python %s in %s is older than %s; refusing to patch: %s. Upgrade "
                           "flashinfer-python (and its cubin/jit-cache packages) to >= %s." % (
                               venv.flashinfer_version, venv.site_packages, minimum, EMPTY_KERNEL_WHY,
                               minimum), result)


def compile_in_process(path, data):
    compile(data, path, "exec", dont_inherit=True)


def apply(venv_path, min_flashinfer=MIN_FLASHINFER, workspace_preflight=True, backup=False,
          check_mode=False, compile_check=compile_in_process, backup_local=None, site_packages=None):
    """state=present. Returns the result dict; raises PatchRefused or af.TransactionError."""
    venv = Venv(venv_path, site_packages)
    result = _base_result(venv)
    check_flashinfer(venv, min_flashinfer, result)
    identities = {}
    files = read_guard_files(venv, identities)
    helpers = sm120_helpers(venv)
    try:
        layout, sites, changed = fg.plan(files, helpers, workspace_preflight)
    except fg.LayoutError as exc:
        raise PatchRefused("sglang %s in %s: %s" % (venv.sglang_version, venv.root, exc), result)
    result["layout"] = layout
    result["sites"] = [site.as_dict() for site in sites]
    for rel, new in changed.items():
        try:
            compile_check(venv.path(rel), new)
        except SyntaxError as exc:
            raise PatchRefused("%s: the patched file would not compile (%s); nothing written" % (
                venv.path(rel), exc), result)
    merged = dict(files)
    merged.update(changed)
    admitted, _sites = fg.verify_admitted(merged, helpers, workspace_preflight)
    if not admitted:
        raise PatchRefused("internal check failed: the planned patch does not make every gate admit "
                           "SM120; nothing written", result)
    problems = link_problems(venv, changed) if changed else []
    problems += [af.writable_problem(venv.path(rel)) for rel in sorted(changed)]
    problems = [p for p in problems if p]
    if problems:
        raise PatchRefused("cannot patch: %s; nothing written" % "; ".join(problems), result)
    for rel in sorted(files):
        result["files"].append({
            "path": venv.path(rel),
            "sha256_before": af.sha256_bytes(files[rel]),
            "sha256_after": af.sha256_bytes(merged[rel]),
            "changed": rel in changed,
        })
    result["diff"] = [_diff(rel, venv.root, files[rel], changed[rel]) for rel in sorted(changed)]
    result["changed"] = bool(changed)
    todo = [site for site in result["sites"] if site["status"] == "patch"]
    if not changed:
        result["msg"] = "every gate already admits SM120 (%d site(s)); nothing to do" % len(sites)
        return result
    if check_mode:
        for site in todo:
            site["status"] = "would_patch"
        result["msg"] = "would patch %d site(s) in %d file(s)" % (len(todo), len(changed))
        return result

    state = load_state(venv.state_dir)
    try:
        for rel in sorted(changed):
            keep_original(venv.state_dir, files[rel])
            if backup and backup_local:
                result["backup_files"].append(backup_local(venv.path(rel)))
        af.replace_all([(venv.path(rel), files[rel], changed[rel]) for rel in sorted(changed)],
                       root=venv.write_root, identities=identities)
    except BaseException:
        _prune_originals(venv.state_dir, state)  # no record of a patch that did not happen
        for path in result["backup_files"]:
            os.unlink(path)
        raise
    for rel in sorted(changed):
        state["files"][rel] = {
            "sha256_before": af.sha256_bytes(files[rel]),
            "sha256_after": af.sha256_bytes(changed[rel]),
            "sglang_version": venv.sglang_version,
            "patched_at": _now(),
        }
    try:
        save_state(venv.state_dir, state)
    except BaseException:
        # Without a record, 'absent' could not undo this: put the files back first.
        af.replace_all([(venv.path(rel), changed[rel], files[rel]) for rel in sorted(changed)],
                       root=venv.write_root)
        raise
    for rel in sorted(changed):
        af.invalidate_bytecode(venv.path(rel), root=venv.write_root)
    for site in todo:
        site["status"] = "patched"
    result["msg"] = "patched %d site(s) in %d file(s)" % (len(todo), len(changed))
    return result


def revert(venv_path, check_mode=False, site_packages=None):
    """state=absent: restore exact originals of files this module changed; leave foreign edits."""
    venv = Venv(venv_path, site_packages)
    result = _base_result(venv)
    problems = state_link_problems(venv)
    if problems:
        raise PatchRefused("cannot restore: %s; nothing written" % "; ".join(problems), result)
    state = load_state(venv.state_dir)
    restores, dropped, foreign, warnings = [], [], [], []
    identities = {}
    for rel, record in sorted(state["files"].items()):
        path = venv.path(rel)
        current = None
        if os.path.isfile(path):
            current, identities[path] = af.read_snapshot(path)
        current_hash = af.sha256_bytes(current) if current is not None else None
        entry = {"path": path, "sha256_before": current_hash, "sha256_after": current_hash,
                 "changed": False}
        if current_hash == record["sha256_after"]:
            original_path = os.path.join(venv.state_dir, "originals", record["sha256_before"])
            if not os.path.isfile(original_path) or af.sha256_file(original_path) != record["sha256_before"]:
                raise PatchRefused("%s: the kept original %s is missing or altered; cannot restore "
                                   "exact pre-patch bytes, nothing written" % (path, original_path), result)
            original = af.read_bytes(original_path)
            restores.append((rel, current, original))
            entry.update(sha256_after=record["sha256_before"], changed=True)
            result["diff"].append(_diff(rel, venv.root, current, original))
        elif current_hash == record["sha256_before"]:
            dropped.append(rel)  # already the original (e.g. sglang reinstalled)
        else:
            foreign.append(rel)
            warnings.append("%s changed since this module patched it (sha256 %s, expected %s); "
                            "left alone" % (path, current_hash, record["sha256_after"]))
        result["files"].append(entry)
    result["foreign_files"] = [venv.path(rel) for rel in foreign]
    result["warnings"] = warnings
    problems = link_problems(venv, [rel for rel, _c, _o in restores]) if restores or dropped else []
    problems += [af.writable_problem(venv.path(rel)) for rel, _c, _o in restores]
    problems = [p for p in problems if p]
    if problems:
        raise PatchRefused("cannot restore: %s; nothing written" % "; ".join(problems), result)
    # A record of files that hold their original bytes again is rewritten too: it is part of what the server
    # runs (the fingerprint reads it), so that is a change.
    result["changed"] = bool(restores or dropped)
    if check_mode or not restores and not dropped:
        verb = "would restore" if check_mode else "restored"
        result["msg"] = "%s %d file(s)" % (verb, len(restores)) if restores else \
            "would clean the state record (the files hold their original bytes)" if dropped else \
            "nothing of this module's to restore"
        return result
    af.replace_all([(venv.path(rel), current, original) for rel, current, original in restores],
                   root=venv.write_root, identities=identities)
    for rel, _current, _original in restores:
        af.invalidate_bytecode(venv.path(rel), root=venv.write_root)
    for rel in [r for r, _c, _o in restores] + dropped:
        del state["files"][rel]
    save_state(venv.state_dir, state)
    _prune_originals(venv.state_dir, state)
    result["msg"] = "restored %d file(s) to their exact pre-patch bytes" % len(restores) if restores \
        else "files already hold their original bytes; state record cleaned"
    return result


def _prune_originals(state_dir, state):
    keep = set(record["sha256_before"] for record in state["files"].values())
    af.prune_dir(_venv_of(state_dir), os.path.join(state_dir, "originals"), keep)
    if not state["files"] and not os.path.islink(state_dir):
        shutil.rmtree(state_dir, ignore_errors=True)
