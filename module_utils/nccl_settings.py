# -*- coding: utf-8 -*-
"""Validate NCCL settings before they reach an SGLang server.

Pure logic, no I/O. ``validate(settings, context)`` returns (errors, warnings):
errors refuse the whole change, warnings are reported. Every message says why
and what to use instead. Values follow NCCL's own documentation (env.rst);
the known-bad combinations come from NCCL's docs and issue tracker (see
shared reference nccl.md).
"""
from __future__ import annotations

import difflib
import re

_ONE_OR_ZERO = ("0", "1")
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
ALGORITHMS = ("ring", "tree", "collnetchain", "collnetdirect", "nvls", "nvlstree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "sendrecv", "alltoall")
# Algorithms that implement all-gather (SGLang captures all-gathers in CUDA graphs).
ALLGATHER_ALGORITHMS = ("ring", "nvls", "collnetdirect", "pat")
DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")
PER_COLLECTIVE_SINCE = (2, 24)
BUFFSIZE_MAX = 1 << 30  # 1 GiB per channel buffer; larger values exhaust GPU memory long before they help
CTAS_64_SINCE = (2, 25)

# Releases with known failures on RTX PRO 6000 / SM120 (NVIDIA/nccl issue tracker).
KNOWN_BAD_RELEASES = (
    ((2, 26, 2), (2, 26, 2), "NCCL 2.26.2 raises illegal memory access for collectives >= 512 KiB on RTX PRO 6000 "
                             "(NVIDIA/nccl #2418); use a later release"),
    ((2, 26, 5), (2, 29, 2), "NCCL 2.26.5 to 2.29.2 can hang in AllReduce with P2P on dual RTX PRO 6000 "
                             "(NVIDIA/nccl #1999); use 2.29.3 or later, or soak-test this host"),
)


def _version_tuple(text):
    if not text:
        return None
    parts = re.findall(r"\d+", text)[:3]
    return tuple(int(p) for p in parts) + (0,) * (3 - len(parts)) if parts else None


class Context(object):
    """What validation needs to know about the host and its software."""

    def __init__(self, nccl_version=None, nvlink=False, gpu_count=None, sglang_overrides=None):
        self.nccl_version = nccl_version
        self.nccl = _version_tuple(nccl_version)
        self.nvlink = nvlink
        self.gpu_count = gpu_count
        # {"NAME": "always" | "conditional"}: what the installed SGLang sets at start-up
        self.sglang_overrides = sglang_overrides or {}

    def at_least(self, version):
        return self.nccl is not None and self.nccl[:len(version)] >= version


def _int(value):
    # Only the forms NCCL's strtoll(value, NULL, 0) and Python read alike: decimal without a leading zero (C reads
    # 010 as octal) and 0x hex; no 1_000, no spaces, at most 12 digits.
    text = str(value)
    if re.fullmatch(r"0|[1-9][0-9]{0,11}", text):
        return int(text)
    if re.fullmatch(r"0[xX][0-9a-fA-F]{1,10}", text):
        return int(text, 16)
    return None


def _check_choice(choices, label):
    def check(name, value, ctx):
        if str(value) not in choices:
            return ["%s=%s: %s is one of %s" % (name, value, label, ", ".join(choices))], []
        return [], []
    return check


def _check_bool(name, value, ctx):
    return _check_choice(_ONE_OR_ZERO, "a switch")(name, value, ctx)


def _check_range(low, high, deprecated_by=None):
    def check(name, value, ctx):
        number = _int(value)
        top = high(ctx) if callable(high) else high
        if number is None or not low <= number <= top:
            return ["%s=%s: must be an integer from %d to %d" % (name, value, low, top)], []
        if deprecated_by:
            return [], ["%s is deprecated since NCCL 2.17; use %s" % (name, deprecated_by)]
        return [], []
    return check


def _ctas_max(ctx):
    return 64 if ctx.at_least(CTAS_64_SINCE) or ctx.nccl is None else 32


def _check_p2p_level(name, value, ctx):
    text = str(value).upper()
    if text in P2P_LEVELS or (_int(text) is not None and 0 <= _int(text) <= 5):
        warnings = []
        if text in ("SYS", "5"):
            warnings.append("%s=SYS lets P2P cross CPU sockets: on some PCIe boxes it deadlocks or faults under "
                            "load; soak-test before production" % name)
        return [], warnings
    return ["%s=%s: NCCL accepts %s (or 0-5)" % (name, value, ", ".join(P2P_LEVELS))], []


def _check_buffsize(name, value, ctx):
    number = _int(value)
    if number is None or number < 65536 or number > BUFFSIZE_MAX or number & (number - 1):
        return ["%s=%s: a power of two in bytes, from 65536 to %d (NCCL's default is 4194304)" % (
            name, value, BUFFSIZE_MAX)], []
    return [], []


def _check_nthreads(name, value, ctx):
    return _check_choice(("64", "128", "256", "512"), "a thread count")(name, value, ctx)


def _check_ifname(name, value, ctx):
    text = str(value)
    if not re.fullmatch(r"[\^=]?=?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*", text):
        return ["%s=%s: a comma-separated list of interface names or prefixes (optionally ^ to exclude, "
                "= for exact names), e.g. eth0 or ^docker,lo" % (name, value)], []
    return [], []


def _check_path(name, value, ctx):
    if not str(value).startswith("/"):
        return ["%s=%s: an absolute path on the host" % (name, value)], []
    if name == "NCCL_CONF_FILE" and ctx.nccl is not None and not ctx.at_least((2, 23)):
        return ["NCCL_CONF_FILE needs NCCL 2.23 or later (installed: %s); use /etc/nccl.conf" % ctx.nccl_version], []
    return [], []


def _split_list(text, allowed, what, name):
    """'^A,B' or 'A,B' -> (exclude, [items]) or raises ValueError with a message."""
    exclude = text.startswith("^")
    items = [item.lower() for item in text[1:].split(",")] if exclude else [item.lower() for item in text.split(",")]
    bad = [item for item in items if item not in allowed]
    if not items or bad:
        raise ValueError("%s: unknown %s %s; NCCL knows %s" % (
            name, what, ", ".join(bad) or "(empty)", ", ".join(allowed)))
    return exclude, items


def _parse_selection(name, value, allowed, what, ctx):
    """Global ('Ring,Tree', '^Tree') or per-collective ('allreduce:tree;allgather:ring') form."""
    text = str(value)
    if ":" not in text:
        return {"*": _split_list(text, allowed, what, name)}, []
    errors = []
    if ctx.nccl is not None and not ctx.at_least(PER_COLLECTIVE_SINCE):
        errors.append("%s=%s: the per-collective form needs NCCL 2.24 or later (installed: %s)" % (
            name, value, ctx.nccl_version))
    elif ctx.nccl is None:
        errors.append("%s=%s: the per-collective form needs NCCL 2.24+, and the installed NCCL version is unknown"
                      % (name, value))
    selection = {}
    for part in text.split(";"):
        collective, _colon, rest = part.partition(":")
        collective = collective.lower()
        if collective not in COLLECTIVES:
            raise ValueError("%s: unknown collective %r; NCCL knows %s" % (name, collective, ", ".join(COLLECTIVES)))
        selection[collective] = _split_list(rest, allowed, what, name)
    return selection, errors


def _check_algo(name, value, ctx):
    try:
        selection, errors = _parse_selection(name, value, ALGORITHMS, "algorithm", ctx)
    except ValueError as exc:
        return [str(exc)], []
    warnings = []
    chosen = selection.get("*")
    if chosen is not None:
        exclude, items = chosen
        usable = [a for a in ALLGATHER_ALGORITHMS if (a not in items) == exclude]
        if not usable or (not exclude and "ring" not in items):
            errors.append("%s=%s applies to every collective, but all-gather has no %s implementation; SGLang "
                          "captures all-gathers in CUDA graphs, so the server fails at start-up or graph capture. "
                          "Select the algorithm for all-reduce only: NCCL_ALGO=allreduce:%s (NCCL 2.24+)" % (
                              name, value, "/".join(items), ",".join(items)))
    if ctx.at_least(PER_COLLECTIVE_SINCE) and chosen is None:
        warnings.append("%s=%s: since NCCL 2.24 a collective whose algorithm list has no usable entry fails "
                        "instead of falling back to Ring" % (name, value))
    return errors, warnings


def _check_proto(name, value, ctx):
    try:
        selection, errors = _parse_selection(name, value, PROTOCOLS, "protocol", ctx)
    except ValueError as exc:
        return [str(exc)], []
    for pair in selection.values():
        exclude, items = pair
        if not exclude and "ll128" in items and not ctx.nvlink:
            errors.append("%s=%s forces LL128 on a host without NVLink: NCCL's docs warn this can corrupt data "
                          "silently; leave NCCL_PROTO unset (NCCL picks LL128 only where it is safe)" % (name, value))
    return errors, []


def _check_debug(name, value, ctx):
    return _check_choice(DEBUG_LEVELS, "a debug level")(name, value, ctx)


VARIABLES = {
    "NCCL_P2P_LEVEL": _check_p2p_level,
    "NCCL_P2P_DISABLE": _check_bool,
    "NCCL_SHM_DISABLE": _check_bool,
    "NCCL_ALGO": _check_algo,
    "NCCL_PROTO": _check_proto,
    "NCCL_BUFFSIZE": _check_buffsize,
    "NCCL_NTHREADS": _check_nthreads,
    "NCCL_MIN_NCHANNELS": _check_range(1, 32, deprecated_by="NCCL_MIN_CTAS"),
    "NCCL_MAX_NCHANNELS": _check_range(1, 32, deprecated_by="NCCL_MAX_CTAS"),
    "NCCL_MIN_CTAS": _check_range(1, _ctas_max),
    "NCCL_MAX_CTAS": _check_range(1, _ctas_max),
    "NCCL_CUMEM_ENABLE": _check_bool,
    "NCCL_NVLS_ENABLE": _check_bool,
    "NCCL_IGNORE_CPU_AFFINITY": _check_bool,
    "NCCL_GRAPH_REGISTER": _check_bool,
    "NCCL_GRAPH_MIXING_SUPPORT": _check_bool,
    "NCCL_IB_DISABLE": _check_bool,
    "NCCL_NET_GDR_LEVEL": _check_p2p_level,
    "NCCL_SOCKET_IFNAME": _check_ifname,
    "GLOO_SOCKET_IFNAME": _check_ifname,
    "NCCL_DEBUG": _check_debug,
    "NCCL_DEBUG_SUBSYS": lambda name, value, ctx: ([], []),
    "NCCL_TOPO_FILE": _check_path,
    "NCCL_GRAPH_FILE": _check_path,
    "NCCL_CONF_FILE": _check_path,
}


def _as_written(name, text):
    """Why TEXT would not reach NCCL as it is checked here, or None. Each check reads the value exactly as the hook
    and the EnvironmentFile write it: no stripping (systemd drops the spaces and tabs around an EnvironmentFile
    value, the hook keeps them) and no Unicode case mapping (NCCL compares ASCII; "\u017fys".upper() is "SYS" in
    Python, but NCCL reads the bytes it was given)."""
    if text != text.strip():
        return ("%s=%r: a value with leading or trailing whitespace, which systemd drops from an EnvironmentFile "
                "line and the start-up hook keeps; write it without" % (name, text))
    if not text.isascii():
        odd = next(ch for ch in text if not ch.isascii())
        return ("%s=%r: holds U+%04X; NCCL reads its settings as ASCII, and a check after Unicode case mapping "
                "would accept a value NCCL does not (use plain ASCII letters)" % (name, text, ord(odd)))
    return None


def suggest(name):
    close = difflib.get_close_matches(name.upper(), list(VARIABLES), n=1, cutoff=0.75)
    return close[0] if close else None


def validate(settings, ctx):
    """(errors, warnings) for a {NAME: value} mapping; nothing is written when errors is not empty."""
    errors, warnings = [], []
    for name in sorted(settings):
        value = settings[name]
        check = VARIABLES.get(name)
        if check is None:
            guess = suggest(name)
            hint = "did you mean %s?" % guess if guess else "known: %s" % ", ".join(sorted(VARIABLES))
            errors.append("%s is not an NCCL setting this role knows; %s" % (name, hint))
            continue
        if value is None or str(value).strip() == "":
            errors.append("%s is empty: remove it to use NCCL's default" % name)
            continue
        written = _as_written(name, str(value))
        if written:
            errors.append(written)
            continue
        found_errors, found_warnings = check(name, value, ctx)
        errors += found_errors
        warnings += found_warnings
        overridden = ctx.sglang_overrides.get(name)
        if overridden == "always":
            errors.append("%s is overwritten by SGLang at start-up (_set_envs_and_config), whatever is set here: "
                          "remove it" % name)
        elif overridden == "conditional":
            warnings.append("%s may be overwritten by SGLang at start-up (_set_envs_and_config sets it in some "
                            "configurations); check the server's /proc/<pid>/environ" % name)
    return errors + _combinations(settings), warnings


def _combinations(settings):
    errors = []
    if settings.get("NCCL_P2P_DISABLE") == "1" and "NCCL_P2P_LEVEL" in settings:
        errors.append("NCCL_P2P_DISABLE=1 with NCCL_P2P_LEVEL set: P2P is off, the level means nothing; keep one")
    for low, high in (("NCCL_MIN_CTAS", "NCCL_MAX_CTAS"), ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")):
        if low in settings and high in settings and _int(settings[low]) and _int(settings[high]) and \
                _int(settings[low]) > _int(settings[high]):
            errors.append("%s=%s is above %s=%s" % (low, settings[low], high, settings[high]))
    return errors


def release_problems(ctx):
    """Messages for an installed NCCL release with known failures on these GPUs."""
    found = []
    if ctx.nccl is None:
        return found
    for low, high, why in KNOWN_BAD_RELEASES:
        if low <= ctx.nccl <= high:
            found.append("installed NCCL %s: %s" % (ctx.nccl_version, why))
    return found


# Order of nvidia-smi link types from nearest to farthest (NV# handled separately).
_LINK_ORDER = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")


def worst_gpu_link(topology):
    """The farthest link type between any two GPUs in an nvidia-smi topo -m matrix, or None."""
    worst = None
    matrix = topology.get("matrix", {})
    gpus = topology.get("gpus", [])
    for a in gpus:
        for b in gpus:
            link = (matrix.get(a) or {}).get(b)
            if a == b or not link:
                continue
            if link.startswith("NV"):
                link = "X"  # NVLink: nearer than any PCIe path
            if link in _LINK_ORDER and (worst is None or _LINK_ORDER.index(link) > _LINK_ORDER.index(worst)):
                worst = link
    return worst


def profile_settings(profile, gpu_facts):
    """Settings a profile chooses from the host's GPU facts: {NAME: {"value", "reason"}} plus notes."""
    notes = []
    if profile in ("custom", "none"):
        return {}, notes
    if profile == "nvlink":
        notes.append("NVLink host: NCCL's defaults (P2P over NVLink, LL128 where safe) are right; nothing set")
        return {}, notes
    worst = worst_gpu_link(gpu_facts.get("topology") or {})
    if not gpu_facts.get("all_p2p_ok"):
        notes.append("P2P is not OK between every GPU pair: NCCL falls back to shared memory by itself; nothing set")
        return {}, notes
    if worst in ("PHB", "NODE"):
        return {"NCCL_P2P_LEVEL": {
            "value": "PHB",
            "reason": "GPUs meet across PCIe host bridges (worst link %s) and report P2P OK; NCCL stops P2P at PXB "
                      "by default, so without this the all-reduce goes through shared memory (measured with P2P "
                      "off: 16-59 us instead of 10-15 us per verify-size all-reduce)" % worst}}, notes
    if worst == "SYS":
        notes.append("GPUs meet across CPU sockets (SYS): P2P at that level deadlocks on some boxes; left to NCCL "
                     "(shared memory); measure before raising NCCL_P2P_LEVEL")
    else:
        notes.append("GPUs share PCIe switches (worst link %s): NCCL already uses P2P there; nothing set" % worst)
    return {}, notes


def normalize(settings):
    """{NAME: value | {"value", "reason"}} -> {NAME: {"value": str, "reason": str}}."""
    out = {}
    for name, spec in (settings or {}).items():
        if isinstance(spec, dict):
            value, reason = spec.get("value"), spec.get("reason") or "set by the operator"
        else:
            value, reason = spec, "set by the operator"
        out[str(name)] = {"value": None if value is None else str(value), "reason": str(reason)}
    return out
