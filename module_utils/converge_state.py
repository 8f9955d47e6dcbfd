# -*- coding: utf-8 -*-
"""A host's converged state, recorded after a deploy and compared in one module run (the fast path, issue 36).

The record (``sglang_layout_converge_record``, JSON, root-only) holds per capability (preflight, install,
fusion_patch, ...):

    inputs    {name: digest}: every variable of the capability's prefixes as the controller templated it, the code
              of its roles and of the shared plugins, the run's tags (computed on the controller, see
              action_plugins/sglang_converge_state.py); names only travel, never values
    covers    what on the host it owns: files (a glob matches a sorted list), secrets (never hashed: size, change
              time, inode, mode and owner), listings (names in a directory,
              optionally matching a glob), sizes (every file under a directory and its size: a model's weights,
              never read), fusion_states (a patch record and every file it lists), units (their
              state, main PID and start), gpu (driver and GPUs as nvidia-smi reports them), http (a URL's status)
    observed  {key: value}: what those covers read at the end of the converge

Compare reads the record, reads every recorded cover again and names each difference: an input of another value,
an input added or gone, a file of other content, mode or owner, a unit restarted or stopped, another GPU or driver.
No difference in any capability: the host is as its last converge left it, and a full run would change nothing.

Pure logic except ``observe``, whose system calls (systemctl, nvidia-smi, HTTP) go through a ``run`` and a ``fetch``
the module passes in.
"""
from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import stat

RECORD_VERSION = 1
COVER_KINDS = ("files", "secrets", "listings", "sizes", "fusion_states", "units", "gpu", "http")
# The observation kinds a comparison can leave out, and the key each writes (files and fusion_states share "file ").
IGNORABLE_KINDS = {"http": "http ", "gpu": "gpu", "units": "unit ", "secrets": "secret ", "listings": "listing "}
UNIT_PROPERTIES = ("ActiveState", "UnitFileState", "MainPID", "ExecMainStartTimestampMonotonic",
                   "NeedDaemonReload", "FragmentPath", "DropInPaths")
# What of `nvidia-smi -q -x` identifies the GPUs and driver; temperatures, clocks, link speed and memory in use move
# on their own and are left out.
GPU_FIELDS = ("name", "uuid", "pci_bus_id", "architecture", "memory_total_mib", "mig_mode")


class StateError(Exception):
    """A record or an argument the module cannot use; the message says which."""


def _sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _lstat(path):
    """(os.lstat's result, None), or (None, what stands for a file that cannot be read: "missing", "unreadable")."""
    try:
        return os.lstat(path), None
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, "unreadable (%s)" % exc.strerror


def _owner(info):
    return "mode=%04o uid=%d gid=%d" % (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)


def describe_path(path):
    """A file's identity as a full run's writers would see it: content, mode and owner, or a link's target."""
    info, problem = _lstat(path)
    if problem:
        return problem
    if stat.S_ISLNK(info.st_mode):
        return "link to %s" % os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return "directory " + _owner(info)
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    try:
        return "sha256:%s %s" % (_sha256_file(path), _owner(info))
    except OSError as exc:
        return "unreadable (%s)" % exc.strerror


def describe_secret(path):
    """A secret file's identity without a digest of what it holds: size, change time, inode, mode and owner."""
    info, problem = _lstat(path)
    if problem:
        return problem
    return "size=%d ctime_ns=%d ino=%d %s" % (info.st_size, info.st_ctime_ns, info.st_ino, _owner(info))


def _expand(pattern):
    """A path, or the sorted paths a glob pattern matches (a pattern matching nothing stays as itself)."""
    if glob.has_magic(pattern):
        return sorted(glob.glob(pattern)) or [pattern]
    return [pattern]


def observe_files(patterns):
    observed = {}
    for pattern in patterns:
        paths = _expand(pattern)
        if glob.has_magic(pattern):
            observed["matches " + pattern] = paths
        for path in paths:
            observed["file " + path] = describe_path(path)
    return observed


def observe_listings(listings):
    observed = {}
    for listing in listings:
        for directory in _expand(listing["path"]):
            key = "listing %s/%s" % (directory, listing.get("glob") or "*")
            try:
                names = sorted(os.listdir(directory))
            except FileNotFoundError:
                observed[key] = "missing"
                continue
            except OSError as exc:
                observed[key] = "unreadable (%s)" % exc.strerror
                continue
            pattern = listing.get("glob")
            if pattern:
                names = [name for name in names if fnmatch.fnmatchcase(name, pattern)]
            observed[key] = names
    return observed


def describe_sizes(directory):
    """{relative path: size} of every file under DIRECTORY (links and other non-files named as such), or why none:
    a missing or truncated weight file shows without reading a byte of it."""
    if not os.path.isdir(directory):
        return describe_path(directory)
    sizes = {}
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in names:
            path = os.path.join(root, name)
            info, problem = _lstat(path)
            relative = os.path.relpath(path, directory)
            sizes[relative] = problem or (info.st_size if stat.S_ISREG(info.st_mode) else "not a regular file")
    return sizes


def observe_fusion_states(paths):
    """The patch record's content and every file it lists (the patched sources)."""
    observed = {}
    for pattern in paths:
        for path in _expand(pattern):
            observed["file " + path] = describe_path(path)
            try:
                with open(path, encoding="utf-8") as handle:
                    listed = json.load(handle).get("files") or {}
            except (OSError, ValueError, AttributeError):
                continue
            # Its names are relative to the venv's site-packages (module_utils/fusion_patcher.py).
            venv = os.path.dirname(os.path.dirname(path))
            bases = sorted(glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))) or [venv]
            for name in sorted(listed):
                target = name if os.path.isabs(name) else os.path.join(bases[0], name)
                observed["file " + target] = describe_path(target)
    return observed


def parse_unit_show(text, units):
    """`systemctl show -p ... U1 U2` (blocks separated by a blank line, in the order asked) -> {unit: state}."""
    blocks = text.strip("\n").split("\n\n")
    states = {}
    for unit, block in zip(units, blocks + [""] * (len(units) - len(blocks))):
        values = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        states[unit] = " ".join("%s=%s" % (name, values.get(name, "?")) for name in UNIT_PROPERTIES)
    return states


def gpu_identity(parsed):
    """The stable part of nvidia_smi.parse_query_xml's result."""
    return {"driver_version": parsed.get("driver_version"), "cuda_version": parsed.get("cuda_version"),
            "gpus": [{field: gpu.get(field) for field in GPU_FIELDS} for gpu in parsed.get("gpus") or []]}


def observe(covers, run, fetch, parse_gpu):
    """{capability: {key: value}} for COVERS ({capability: {kind: ...}}).

    run(argv) -> (rc, out, err); fetch(url, key_file) -> HTTP status (int) or a text saying why none;
    parse_gpu(xml_text) -> nvidia_smi.parse_query_xml's result (raises ValueError on bad output)."""
    units = sorted({unit for cover in covers.values() for unit in cover.get("units") or []})
    unit_states = {}
    if units:
        rc, out, err = run(["systemctl", "show", "--no-pager"] + ["-p" + name for name in UNIT_PROPERTIES]
                           + ["%s.service" % unit if "." not in unit else unit for unit in units])
        unit_states = parse_unit_show(out, units) if rc == 0 else {
            unit: "systemctl show failed: %s" % (err or out).strip()[:200] for unit in units}
    gpu = None
    if any(cover.get("gpu") for cover in covers.values()):
        rc, out, err = run(["nvidia-smi", "-q", "-x"])
        if rc != 0:
            gpu = "nvidia-smi -q -x failed (rc %d): %s" % (rc, (err or out).strip()[:200])
        else:
            try:
                gpu = gpu_identity(parse_gpu(out))
            except ValueError as exc:
                gpu = "nvidia-smi -q -x: %s" % exc
    observed = {}
    for capability, cover in sorted(covers.items()):
        seen = {}
        seen.update(observe_files(cover.get("files") or []))
        for path in cover.get("secrets") or []:
            seen["secret " + path] = describe_secret(path)
        seen.update(observe_listings(cover.get("listings") or []))
        for directory in cover.get("sizes") or []:
            seen["sizes " + directory] = describe_sizes(directory)
        seen.update(observe_fusion_states(cover.get("fusion_states") or []))
        for unit in cover.get("units") or []:
            seen["unit " + unit] = unit_states[unit]
        if cover.get("gpu"):
            seen["gpu"] = gpu
        for probe in cover.get("http") or []:
            seen["http " + probe["url"]] = fetch(probe["url"], probe.get("key_file") or "")
        observed[capability] = seen
    return observed


def cover_problems(covers):
    """Why COVERS cannot be observed ([] when it can): the shape the module documents."""
    problems = []
    if not isinstance(covers, dict):
        return ["covers must be a mapping of capability to what it covers"]
    for capability, cover in covers.items():
        if not isinstance(cover, dict):
            problems.append("covers.%s must be a mapping" % capability)
            continue
        for kind in cover:
            if kind not in COVER_KINDS:
                problems.append("covers.%s.%s: unknown (one of %s)" % (capability, kind, ", ".join(COVER_KINDS)))
        for kind in ("files", "secrets", "sizes", "fusion_states", "units"):
            values = cover.get(kind) or []
            if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
                problems.append("covers.%s.%s must be a list of non-empty strings" % (capability, kind))
            elif kind != "units" and not all(os.path.isabs(v) for v in values):
                problems.append("covers.%s.%s must hold absolute paths" % (capability, kind))
        for listing in cover.get("listings") or []:
            if not isinstance(listing, dict) or not os.path.isabs(str(listing.get("path", ""))):
                problems.append("covers.%s.listings: each needs an absolute path" % capability)
        for probe in cover.get("http") or []:
            if not isinstance(probe, dict) or not str(probe.get("url", "")).startswith(("http://", "https://")):
                problems.append("covers.%s.http: each needs an http(s) url" % capability)
        if not isinstance(cover.get("gpu", False), bool):
            problems.append("covers.%s.gpu must be true or false" % capability)
    return problems


def render(inputs, covers, observed):
    """The record's text (stable: the same state writes the same bytes)."""
    capabilities = {name: {"inputs": inputs.get(name, {}), "covers": covers.get(name, {}),
                           "observed": observed.get(name, {})}
                    for name in sorted(set(inputs) | set(covers))}
    return json.dumps({"version": RECORD_VERSION, "capabilities": capabilities}, indent=1, sort_keys=True) + "\n"


def parse(text):
    """The record's capabilities, or None for no record; StateError for one this version cannot read."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StateError("the converge record is not JSON (%s)" % exc)
    if not isinstance(data, dict) or data.get("version") != RECORD_VERSION \
            or not isinstance(data.get("capabilities"), dict):
        raise StateError("the converge record is not version %d" % RECORD_VERSION)
    return data["capabilities"]


def _value_differences(kind, recorded, now):
    """Each name whose value differs, was added or is gone, as a line."""
    lines = []
    label = "input " if kind == "input" else ""
    for name in sorted(set(recorded) | set(now)):
        if name not in recorded:
            lines.append("%s%s is new since the converge" % (label, name))
        elif name not in now:
            lines.append("%s%s is gone since the converge" % (label, name))
        elif recorded[name] != now[name]:
            lines.append(_describe_change(kind, name, recorded[name], now[name]))
    return lines


def _describe_change(kind, name, before, after):
    if kind == "input":
        return "input %s changed" % name
    if isinstance(before, list) and isinstance(after, list):
        added = [item for item in after if item not in before]
        gone = [item for item in before if item not in after]
        return "%s: %s" % (name, ", ".join(["+" + str(item) for item in added] + ["-" + str(item) for item in gone]))
    if name == "gpu" and isinstance(before, dict) and isinstance(after, dict):
        parts = ["%s %s -> %s" % (key, before.get(key), after.get(key))
                 for key in ("driver_version", "cuda_version") if before.get(key) != after.get(key)]
        if before.get("gpus") != after.get("gpus"):
            counts = (len(before.get("gpus") or []), len(after.get("gpus") or []))
            parts.append("the GPUs differ (%d recorded, %d now)" % counts)
        return "gpu: " + "; ".join(parts)
    if name.startswith("sizes ") and isinstance(before, dict) and isinstance(after, dict):
        parts = ["%s %s" % (path, "gone" if path not in after else "is new" if path not in before
                            else "%s -> %s bytes" % (before[path], after[path]))
                 for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)]
        return "%s: %s" % (name, "; ".join(parts[:5]) + ("; and %d more" % (len(parts) - 5) if len(parts) > 5 else ""))
    if name.startswith("sizes ") and (isinstance(before, dict) or isinstance(after, dict)):
        def shown(value):
            return "%d files" % len(value) if isinstance(value, dict) else value
        return "%s: %s at the converge, %s now" % (name, shown(before), shown(after))
    if name.startswith("file ") and str(before).startswith("sha256:") and str(after).startswith("sha256:"):
        what = "content" if before.split()[0] != after.split()[0] else "mode or owner"
        return "%s: %s differs from its converge" % (name, what)
    return "%s: %s at the converge, %s now" % (name, before, after)


def compare(recorded, inputs, observed, ignore=(), ignore_covers=()):
    """{capability: [difference]} between the record, the controller's INPUTS and the host's OBSERVED now; every
    capability of either side appears ([] when it matches). Input names in IGNORE are left out on both sides, and
    what the record observed of the kinds in IGNORE_COVERS (IGNORABLE_KINDS; OBSERVED lacks them: covers_of)."""
    left_out = tuple(IGNORABLE_KINDS[kind] for kind in ignore_covers)
    if recorded is None:
        return {"record": ["no converge record on the host"]}
    result = {}
    for name in sorted(set(recorded) | set(inputs)):
        entry = recorded.get(name)
        if entry is None:
            result[name] = ["not in the converge record"]
            continue
        if name not in inputs:
            result[name] = ["recorded, but no longer deployed"]
            continue
        lines = _value_differences("input", {key: value for key, value in (entry.get("inputs") or {}).items()
                                             if key not in ignore},
                                   {key: value for key, value in inputs[name].items() if key not in ignore})
        then = {key: value for key, value in (entry.get("observed") or {}).items()
                if not (left_out and key.startswith(left_out))}
        lines += _value_differences("observed", then, observed.get(name) or {})
        result[name] = lines
    return result


def covers_of(recorded, ignore=()):
    """What the record covers, per capability, less the kinds in IGNORE."""
    return {name: {kind: what for kind, what in (entry.get("covers") or {}).items() if kind not in ignore}
            for name, entry in (recorded or {}).items()}
