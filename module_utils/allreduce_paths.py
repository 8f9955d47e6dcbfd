# -*- coding: utf-8 -*-
"""Which all-reduce paths an installed SGLang + FlashInfer can run, and what each needs.

A path is a combination of two optional kernels on top of NCCL:

* ``fusion``: FlashInfer's fused allreduce + residual + RMSNorm (trtllm backend), turned on by the server flag
  the installed SGLang declares (on SM120 only once ``sglang_fusion_patch`` admitted it and its canary passed);
  the paths without it pass the flag that keeps it off, where the release declares one (SGLang turns fusion on by
  itself on SM90/SM100 for the architectures it knows);
* ``pcie_ipc``: FlashInfer >= 0.7.0's ``PcieIpcAllReduceWorkspace``, turned on in SGLang 0.5.21+ by the
  environment variable ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1``.

Everything is read from the venv's dist-info and source text, never imported (no torch, no GPU needed):
``source_facts`` turns file texts into facts, ``decide`` turns facts plus the server's parallelism into a
verdict per path with the flags and environment it needs, or the reasons it cannot run here.
"""
from __future__ import annotations

import ast
import grp
import json
import os
import pwd
import re

from ansible.module_utils import allreduce_choice as ac
from ansible.module_utils import fusion_guards as fg
from ansible.module_utils import pkg_versions as pv

# The one list of all-reduce paths (docs/allreduce-paths.md; tests/unit/test_allreduce_path_list.py holds the
# module's and the role's choices, the lab stand-in's table and the docs to it). A path is NCCL plus the FlashInfer
# kernels its name joins with '+' (nccl: none); each kernel's rules are in KERNELS below. Most ambitious first: the
# order the candidates are listed in (before any measurement 'auto' keeps today's choice, see decide).
AUTO_ORDER = ("fusion+pcie_ipc", "pcie_ipc", "fusion", "nccl")
PATHS = tuple(reversed(AUTO_ORDER))
REQUESTS = ("auto",) + PATHS

MIN_FLASHINFER_FUSION = "0.6.17"   # first release whose trtllm kernels are built for SM12x (PR #3903)
MIN_FLASHINFER_PCIE_IPC = "0.7.0"  # first release with flashinfer.comm.PcieIpcAllReduceWorkspace

PCIE_SWITCH = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"
PCIE_MAX_NUMEL = "SGLANG_PCIE_IPC_MAX_NUMEL"
AUTOTUNE_DIR = "FLASHINFER_AUTOTUNE_DIR"
PACK_ELEMS = 8  # the PCIe IPC kernels address their scratch in 16-byte packs: max_numel % 8 == 0 for bf16

# Source files the facts come from (relative to site-packages).
SG_ENVIRON = "sglang/srt/environ.py"
SG_PCIE = "sglang/srt/distributed/device_communicators/pcie_ipc_ar.py"
SG_PARALLEL = "sglang/srt/distributed/parallel_state.py"
SG_FUSION = fg.FUSION_FILE
SG_SERVER_ARGS = "sglang/srt/server_args.py"
SG_FIELDS_DIR = "sglang/srt/arg_groups/fields"
FI_COMM_INIT = "flashinfer/comm/__init__.py"
FI_PCIE = "flashinfer/comm/pcie_ipc_ar.py"
FI_PCIE_TUNING = "flashinfer/comm/pcie_ipc_tuning.py"
FI_TRTLLM = "flashinfer/comm/trtllm_ar.py"

_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/+-]*$")


class PathsError(Exception):
    """Bad input, or a requested path that cannot run here. ``result`` holds what was learnt."""

    def __init__(self, msg, result=None):
        Exception.__init__(self, msg)
        self.msg = msg
        self.result = result or {}


# --- reading the installed packages -------------------------------------------------------------------------

def source_files(site_packages):
    """{relative path: text} of every file the facts are read from (missing files are absent)."""
    rels = [SG_ENVIRON, SG_PCIE, SG_PARALLEL, SG_FUSION, SG_SERVER_ARGS, FI_COMM_INIT, FI_PCIE,
            FI_PCIE_TUNING, FI_TRTLLM]
    fields = os.path.join(site_packages, SG_FIELDS_DIR)
    if os.path.isdir(fields):
        rels += sorted(SG_FIELDS_DIR + "/" + name for name in os.listdir(fields) if name.endswith(".py"))
    files = {}
    for rel in rels:
        path = os.path.join(site_packages, rel)
        if os.path.isfile(path):
            with open(path, "r", encoding="utf-8", errors="replace") as handle:
                files[rel] = handle.read()
    return files


def _parse(text):
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _module_constant(text, name):
    """Literal value of a module-level ``name = ...`` / ``name: T = ...``, or None."""
    tree = _parse(text or "")
    if tree is None:
        return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def _declares_env(text, name):
    """``NAME = Env...(...)`` in SGLang's environ.py (a class attribute of its Envs)."""
    return bool(re.search(r"^\s+%s\s*(?::[^=]+)?=\s*Env\w*\(" % re.escape(name), text or "", re.M))


def _defines_class(text, name):
    tree = _parse(text or "")
    return tree is not None and any(isinstance(n, ast.ClassDef) and n.name == name for n in ast.walk(tree))


def _declares_field(files, field, flag):
    """An annotated ServerArgs field, or the literal flag string, in server_args.py / arg_groups/fields."""
    for rel, text in files.items():
        if rel != SG_SERVER_ARGS and not rel.startswith(SG_FIELDS_DIR + "/"):
            continue
        tree = _parse(text)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == field:
                return True
            if isinstance(node, ast.Constant) and node.value == flag:
                return True
    return False


def _dispatch_order(text):
    """Order in which parallel_state's out-of-place dispatch returns 'ca' and 'pcie_ipc' (returns found)."""
    tree = _parse(text or "")
    order = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.FunctionDef) and node.name == "_resolve_outplace_all_reduce_method":
            returns = sorted((n.lineno, n.value.value) for n in ast.walk(node)
                             if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant))
            order = [value for _line, value in returns]
    return order


def source_facts(files, versions):
    """Facts about the paths, from file texts (``source_files``) and dist-info versions. Pure."""
    sg_version = pv.find_distribution(versions, "sglang")
    fi_version = pv.find_distribution(versions, "flashinfer-python")
    fi_sizes = _module_constant(files.get(FI_PCIE), "_SUPPORTED_WORLD_SIZES")
    sg_sizes = _module_constant(files.get(SG_PCIE), "_SUPPORTED_WORLD_SIZES")
    heuristics = _module_constant(files.get(FI_TRTLLM), "_use_oneshot_heuristics")
    order = _dispatch_order(files.get(SG_PARALLEL))
    server_args = [(rel, text.encode("utf-8")) for rel, text in sorted(files.items())
                   if rel == SG_SERVER_ARGS or rel.startswith(SG_FIELDS_DIR + "/")]
    return {
        "sglang_version": sg_version,
        "flashinfer_version": fi_version,
        "fusion_flag": fg.server_flag(server_args),
        # SGLang turns fusion on by itself on SM90/SM100 for the architectures it knows: the paths without it say so
        "no_fusion_flag": fg.server_no_fusion_flag(server_args),
        # _resolve_backend: "FlashInfer allreduce fusion trtllm backend supports single-node only." (0.5.14+)
        "fusion_single_node_only": "trtllm backend supports single-node only" in files.get(SG_FUSION, ""),
        "trtllm_oneshot_world_sizes": sorted(heuristics) if isinstance(heuristics, dict) else None,
        "sglang_pcie_ipc_switch": _declares_env(files.get(SG_ENVIRON), PCIE_SWITCH),
        "sglang_pcie_ipc_max_numel": _declares_env(files.get(SG_ENVIRON), PCIE_MAX_NUMEL),
        "sglang_pcie_ipc_world_sizes": sorted(sg_sizes) if isinstance(sg_sizes, (tuple, list)) else None,
        "sglang_pcie_ipc_off_when_deterministic": "deterministic" in files.get(SG_PCIE, ""),
        "custom_allreduce_before_pcie_ipc": "ca" in order and "pcie_ipc" in order and
                                            order.index("ca") < order.index("pcie_ipc"),
        "disable_custom_all_reduce_flag": _declares_field(files, "disable_custom_all_reduce",
                                                          "--disable-custom-all-reduce"),
        "flashinfer_pcie_ipc": (_defines_class(files.get(FI_PCIE), "PcieIpcAllReduceWorkspace")
                                and "PcieIpcAllReduceWorkspace" in files.get(FI_COMM_INIT, "")),
        "flashinfer_pcie_ipc_world_sizes": sorted(fi_sizes) if isinstance(fi_sizes, (tuple, list)) else None,
        "flashinfer_reads_autotune_dir": AUTOTUNE_DIR in files.get(FI_PCIE_TUNING, ""),
    }


def read_facts(site_packages):
    """``source_facts`` for one site-packages directory."""
    return source_facts(source_files(site_packages), pv.installed_versions(site_packages))


def writable_problem(path, user):
    """Why ``user`` could not create/write ``path`` (owner and mode bits of the nearest existing dir), or None."""
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        return "user %s does not exist on this host" % user
    if account.pw_uid == 0:
        return None
    gids = {account.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return "%s is not a directory" % existing
    st = os.stat(existing)
    if st.st_uid == account.pw_uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid in gids:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    if bits & 3 != 3:
        return "%s (mode %o, owner uid %d) is not writable by %s" % (existing, st.st_mode & 0o7777, st.st_uid, user)
    return None


# --- deciding ------------------------------------------------------------------------------------------------

def _positive_int(setup, name, minimum=1, allow_none=True):
    value = setup.get(name)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PathsError("%s must be an integer >= %d, got %r" % (name, minimum, value))
    return value


def validate_setup(setup):
    """Normalised copy of the server's parallelism and options; PathsError naming the bad value."""
    clean = dict(setup)
    clean["tp_size"] = _positive_int(setup, "tp_size", allow_none=False)
    clean["ep_size"] = _positive_int(setup, "ep_size") or 1
    clean["nnodes"] = _positive_int(setup, "nnodes") or 1
    for name in ("cuda_graph_max_bs", "speculative_num_draft_tokens", "hidden_size"):
        clean[name] = _positive_int(setup, name)
    if clean["tp_size"] % clean["ep_size"]:
        raise PathsError("ep_size %d does not divide tp_size %d" % (clean["ep_size"], clean["tp_size"]))
    autotune = setup.get("autotune_dir")
    if autotune is not None and not _SAFE_PATH.match(autotune):
        raise PathsError("autotune_dir must be an absolute path of letters, digits and ._/+- (it goes into the "
                         "server's environment), got %r" % (autotune,))
    environment = setup.get("environment") or {}
    if not isinstance(environment, dict):
        raise PathsError("environment must be a mapping of the server's environment variables")
    clean["environment"] = environment
    return clean


def _version_floor(reasons, what, version, minimum, why):
    if version is None:
        reasons.append("flashinfer-python is not installed: %s needs >= %s" % (what, minimum))
    elif pv.version_lt(version, minimum):
        reasons.append("flashinfer-python %s is older than %s: %s" % (version, minimum, why))


def _ipc_environment_problem(environment):
    conf = str(environment.get("PYTORCH_CUDA_ALLOC_CONF", ""))
    if re.search(r"expandable_segments\s*:\s*true", conf, re.I):
        return ("PYTORCH_CUDA_ALLOC_CONF=%s: expandable segments break the CUDA IPC handle exchange the kernel's "
                "workspace relies on" % conf)
    return None


def fusion_reasons(facts, setup):
    """Why the fused allreduce+RMSNorm cannot run here ([] = it can)."""
    reasons = []
    tp, ep = setup["tp_size"], setup["ep_size"]
    if tp < 2:
        reasons.append("tp_size %d: there is no all-reduce to fuse" % tp)
    _version_floor(reasons, "the fused kernel", facts["flashinfer_version"], MIN_FLASHINFER_FUSION,
                   "its trtllm allreduce-fusion kernels are not built for SM12x (empty one-shot kernel, PR #3903)")
    if not facts["fusion_flag"]:
        reasons.append("sglang %s declares no FlashInfer allreduce-fusion flag" % facts["sglang_version"])
    if setup["nnodes"] > 1 and facts["fusion_single_node_only"]:
        reasons.append("nnodes %d: SGLang's trtllm fusion backend is single-node only" % setup["nnodes"])
    sizes = facts["trtllm_oneshot_world_sizes"]
    if sizes and tp >= 2 and tp not in sizes:
        reasons.append("tp_size %d: FlashInfer's one-shot/two-shot heuristic (trtllm_ar._use_oneshot_heuristics) "
                       "only knows world sizes %s, and SGLang lets it choose" % (tp, sizes))
    if 1 < ep < tp:
        reasons.append("hybrid expert parallelism (ep_size %d < tp_size %d, MoE-TP %d): the fused kernel "
                       "corrupts output there (SGLang PR #32012, no guard on the fused path up to 0.5.23)" % (ep, tp, tp // ep))
    problem = _ipc_environment_problem(setup["environment"])
    if problem:
        reasons.append(problem)
    return reasons


def pcie_ipc_reasons(facts, setup):
    """Why FlashInfer's PCIe IPC all-reduce cannot run here ([] = it can)."""
    reasons = []
    tp = setup["tp_size"]
    if not facts["sglang_pcie_ipc_switch"]:
        reasons.append("sglang %s has no %s switch (first in 0.5.21)" % (facts["sglang_version"], PCIE_SWITCH))
    _version_floor(reasons, "PcieIpcAllReduceWorkspace", facts["flashinfer_version"], MIN_FLASHINFER_PCIE_IPC,
                   "it has no PcieIpcAllReduceWorkspace, so SGLang logs a fallback to NCCL")
    if facts["flashinfer_version"] and not pv.version_lt(facts["flashinfer_version"], MIN_FLASHINFER_PCIE_IPC) \
            and not facts["flashinfer_pcie_ipc"]:
        reasons.append("flashinfer-python %s exports no PcieIpcAllReduceWorkspace (flashinfer/comm)" %
                       facts["flashinfer_version"])
    supported = sorted(set(facts["sglang_pcie_ipc_world_sizes"] or (2, 4, 8)) &
                       set(facts["flashinfer_pcie_ipc_world_sizes"] or (2, 4, 8)))
    if tp not in supported:
        reasons.append("tp_size %d: the PCIe IPC kernels build channels for world sizes %s only" % (tp, supported))
    if setup["nnodes"] > 1:
        reasons.append("nnodes %d: CUDA IPC cannot cross hosts (FlashInfer refuses a group that spans nodes)" %
                       setup["nnodes"])
    if setup.get("deterministic") and facts["sglang_pcie_ipc_off_when_deterministic"]:
        reasons.append("deterministic inference is on: SGLang leaves PCIe IPC all-reduce off (its tactic "
                       "follows the batch shape)")
    problem = _ipc_environment_problem(setup["environment"])
    if problem:
        reasons.append(problem)
    if setup.get("autotune_dir") is None:
        reasons.append("no persistent %s given: every server start would re-tune" % AUTOTUNE_DIR)
    elif setup.get("autotune_dir_problem"):
        reasons.append("%s %s: %s" % (AUTOTUNE_DIR, setup["autotune_dir"], setup["autotune_dir_problem"]))
    return reasons


def max_numel(facts, setup):
    """(value or None, why) for SGLANG_PCIE_IPC_MAX_NUMEL: CUDA-graph max batch x draft tokens x hidden."""
    if not facts["sglang_pcie_ipc_max_numel"]:
        return None, "sglang %s does not read %s" % (facts["sglang_version"], PCIE_MAX_NUMEL)
    missing = [name for name in ("cuda_graph_max_bs", "hidden_size") if setup.get(name) is None]
    if setup.get("speculative") and setup.get("speculative_num_draft_tokens") is None:
        missing.append("speculative_num_draft_tokens")
    if missing:
        return None, "not set (%s unknown here): SGLang sizes the workspace from its own decode config" % \
            ", ".join(missing)
    rows = setup["cuda_graph_max_bs"] * (setup["speculative_num_draft_tokens"] if setup.get("speculative") else 1)
    value = rows * setup["hidden_size"]
    if value % PACK_ELEMS:
        return None, "not set: %d is not a multiple of %d elements (16-byte packs)" % (value, PACK_ELEMS)
    return value, "%d rows (CUDA-graph max batch %d x %d draft tokens) x hidden %d" % (
        rows, setup["cuda_graph_max_bs"], setup["speculative_num_draft_tokens"] if setup.get("speculative") else 1,
        setup["hidden_size"])


def kernels(path):
    """The FlashInfer kernels ``path`` runs on top of NCCL (nccl: none)."""
    return () if path == "nccl" else tuple(path.split("+"))


def _fusion_rules(facts, setup, runs):
    """(reasons, server_args, environment, notes) of the fused kernel for a path that runs it or not."""
    if runs:
        return fusion_reasons(facts, setup), list(facts["fusion_flag"]), {}, []
    off = facts.get("no_fusion_flag") or []
    notes = ["%s: SGLang would otherwise turn fusion on by itself on SM90/SM100 for the architectures it knows" %
             " ".join(off)] if off else []
    return [], list(off), {}, notes


def _pcie_ipc_rules(facts, setup, runs):
    """(reasons, server_args, environment, notes) of the PCIe IPC kernel for a path that runs it or not: its switch
    is written either way where the release reads it (a stale 1 cannot linger)."""
    environment = {PCIE_SWITCH: "1" if runs else "0"} if facts["sglang_pcie_ipc_switch"] else {}
    if not runs:
        return [], [], environment, []
    server_args = []
    if setup.get("autotune_dir"):
        environment[AUTOTUNE_DIR] = setup["autotune_dir"]
    numel, why = max_numel(facts, setup)
    if numel is not None:
        environment[PCIE_MAX_NUMEL] = str(numel)
    notes = ["%s: %s" % (PCIE_MAX_NUMEL, why)]
    if facts["custom_allreduce_before_pcie_ipc"]:
        if setup.get("pcie_ipc_exclusive", True) and facts["disable_custom_all_reduce_flag"]:
            server_args.append("--disable-custom-all-reduce")
            notes.append("--disable-custom-all-reduce: SGLang dispatches its custom all-reduce before PCIe IPC "
                         "(at TP2 it takes every size it fits), so without it the path measured is not PCIe IPC")
        else:
            notes.append("custom all-reduce stays on and is dispatched first: PCIe IPC serves only what it declines")
    return pcie_ipc_reasons(facts, setup), server_args, environment, notes


def _fusion_canary_key(context, setup, environment):
    """What a fusion canary verdict stands for: the venv, the world size and the shapes (hidden size, the verify
    sizes, the server's draft tokens and CUDA-graph max batch: SGLang's own is 32 where unset), GPUs, driver, script."""
    draft = setup.get("speculative_num_draft_tokens")
    return {"venv": context["venv_real"], "world_size": setup["tp_size"], "hidden": setup.get("hidden_size"),
            "tokens": context["tokens"], "draft_tokens": draft,
            "max_batch": (setup.get("cuda_graph_max_bs") or 32) if draft else None,
            "gpu": context.get("gpu"), "canary": context.get("version")}


def _fusion_canary_argv(key):
    return (["--path", "fusion", "--hidden", str(key["hidden"]), "--tokens", key["tokens"]]
            + (["--draft-tokens", str(key["draft_tokens"]), "--max-batch", str(key["max_batch"])]
               if key["draft_tokens"] else []))


def _pcie_ipc_canary_key(context, setup, environment):
    """What a PCIe IPC canary verdict stands for: the venv, the world size, the hidden size, the workspace sizing
    (SGLANG_PCIE_IPC_MAX_NUMEL, or the CUDA-graph max batch and draft tokens SGLang derives it from), GPUs, driver,
    script."""
    numel = environment.get(PCIE_MAX_NUMEL)
    return {"venv": context["venv_real"], "world_size": setup["tp_size"], "hidden": setup.get("hidden_size"),
            "max_numel": int(numel) if numel else None, "max_batch": setup.get("cuda_graph_max_bs"),
            "draft_tokens": setup.get("speculative_num_draft_tokens") if setup.get("speculative") else None,
            "gpu": context.get("gpu"), "canary": context.get("version")}


def _pcie_ipc_canary_argv(key, tokens):
    """The workspace as SGLang sizes it: its SGLANG_PCIE_IPC_MAX_NUMEL, else max batch x draft tokens, else the
    release's own fallback width (the canary reads it from the release)."""
    return (["--path", "pcie_ipc", "--hidden", str(key["hidden"]), "--tokens", tokens]
            + (["--pcie-ipc-max-numel", str(key["max_numel"])] if key["max_numel"] else [])
            + (["--max-batch", str(key["max_batch"])] if key["max_batch"] else [])
            + (["--draft-tokens", str(key["draft_tokens"])] if key["draft_tokens"] and key["max_batch"] else []))


# Each FlashInfer kernel a path may name, applied in this order to every path:
# * rules: (facts, setup, runs) -> (why it cannot run here, what it adds to the server's arguments, to its
#   environment, notes); a reason found elsewhere comes in as setup['<kernel>_unavailable'] (a module option);
# * canary: the proof on the host's GPUs the kernel is held to (tasks in the role run it where it is due):
#   key(context, setup, the kernel's environment), what a verdict stands for; argv(key, tokens), the canary script's
#   arguments before --out. Its record on the host is canary_record(folder, kernel).
KERNELS = {
    "fusion": {"rules": _fusion_rules,
               "canary": {"key": _fusion_canary_key, "argv": lambda key, tokens: _fusion_canary_argv(key)}},
    "pcie_ipc": {"rules": _pcie_ipc_rules,
                 "canary": {"key": _pcie_ipc_canary_key, "argv": _pcie_ipc_canary_argv}},
}


def canary_record(folder, kernel):
    """Where ``kernel``'s canary record is kept in ``folder`` (one folder holds every kernel's):
    <folder>/<kernel, dashed>-canary.json."""
    return os.path.join(folder, "%s-canary.json" % kernel.replace("_", "-"))


def canary_records(folder):
    """[(kernel, its record's path)] for every kernel held to a canary, in KERNELS' order."""
    return [(name, canary_record(folder, name)) for name, kernel in KERNELS.items() if kernel.get("canary")]


def unavailable_param(kernel):
    """The module option (and setup key) carrying a reason, found elsewhere, why ``kernel`` cannot run."""
    return "%s_unavailable" % kernel


def _candidate(path, facts, setup):
    runs = kernels(path)
    reasons, server_args, environment, notes = [], [], {}, []
    if not runs:
        notes.append("NCCL (and SGLang's own custom all-reduce where it applies): no FlashInfer kernel")
    for name, kernel in KERNELS.items():
        why, args, env, said = kernel["rules"](facts, setup, name in runs)
        if name in runs and setup.get(unavailable_param(name)):
            why = why + [setup[unavailable_param(name)]]
        reasons += why
        server_args += args
        environment.update(env)
        notes += said
    return {"path": path, "runnable": not reasons, "reasons": reasons, "server_args": server_args,
            "environment": environment, "notes": notes}


def canary_state(record_text, key, record_path, kernel="pcie_ipc"):
    """{'state': passed | failed | due | cannot_run, 'key', 'summary', 'record', 'why'} of ``kernel``'s canary for
    ``key``, from the recorded result's text (None: none recorded). Pure."""
    state = {"key": key, "summary": None, "record": None}
    if key["hidden"] is None:
        return dict(state, state="cannot_run", why="its canary needs the model's hidden size (give hidden_size, or "
                                                   "a model_path with config.json)")
    gpus = (key.get("gpu") or {}).get("gpus") if key.get("gpu") is not None else None
    if gpus is not None and len(gpus) < key["world_size"]:
        return dict(state, state="cannot_run", why=(
            "its canary runs one process per GPU of the server's tensor-parallel group (%d) on this host, which has "
            "%d: the tensor-parallel size (sglang_server_tp_size) is above the host's GPU count, and a server "
            "spread over hosts cannot use %s" % (key["world_size"], len(gpus), kernel)))
    try:
        record = json.loads(record_text) if record_text is not None else None
    except ValueError:
        record = None
    if not isinstance(record, dict) or record.get("key") != key:
        why = "none recorded" if record_text is None else (
            "the recorded one (%s) was measured for another venv, shapes, sizing, GPUs, driver or canary script"
            % record_path
            if isinstance(record, dict) else "the recorded one (%s) cannot be read" % record_path)
        return dict(state, state="due", why=why)
    state.update(summary=record.get("summary"), record=record)
    if record.get("passed") is True:
        return dict(state, state="passed", why="its canary passed on this host (%s)" % record_path)
    return dict(state, state="failed", why="its canary failed on this host: %s (delete %s to run it again)" % (
        record.get("summary") or "no summary", record_path))


def canary_states(facts, setup, context):
    """{kernel: state} for every kernel whose canary record is given (``context['records']``: {kernel: {'path',
    'text'}}), judged where the kernel's own rules let it run (a reason found elsewhere does not hide a recorded
    verdict, but a canary is not due where the kernel could not serve anyway): ``canary_state`` plus 'file', 'gpus'
    (its processes), 'argv' and 'environment' (to run it in); 'not_needed' where the kernel cannot run here."""
    clean = validate_setup(setup)
    states = {}
    for name, kernel in KERNELS.items():
        record = (context.get("records") or {}).get(name)
        if record is None or not kernel.get("canary"):
            continue
        why, _args, environment, _notes = kernel["rules"](facts, clean, True)
        if why:
            states[name] = {"state": "not_needed", "why": "%s cannot run here anyway" % name, "key": None,
                            "summary": None, "record": None}
            continue
        canary = kernel["canary"]
        key = canary["key"](context, clean, environment)
        state = canary_state(record.get("text"), key, record["path"], name)
        if state["state"] == "due" and clean.get(unavailable_param(name)):  # not run where it could not serve anyway
            state = dict(state, state="not_needed", why="%s cannot run here anyway: %s" % (
                name, clean[unavailable_param(name)]))
        state.update(file=record["path"], gpus=clean["tp_size"], environment=environment,
                     argv=canary["argv"](key, context["tokens"]) if state["state"] != "cannot_run" else [])
        states[name] = state
    return states


def decide_with_canaries(request, facts, setup, recorded_choice=None, context=None):
    """decide(), with each kernel held to its canary where ``context`` = {venv_real, gpu, version, tokens, records:
    {kernel: {path, text}}} names its record (gpu and version may be None: unknown).

    A failed canary, or one that cannot run, refuses every path that names the kernel, with its reason; a canary not
    yet run for this server leaves them runnable and says it is due (the role runs it, then asks again). The
    result's ``canaries`` holds each kernel's state."""
    if not context:
        return decide(request, facts, setup, recorded_choice)
    states = canary_states(facts, setup, context)
    setup = dict(setup)
    for name, state in states.items():
        if state["state"] in ("failed", "cannot_run"):
            setup[unavailable_param(name)] = "; ".join(r for r in (
                setup.get(unavailable_param(name)), "%s is unproven here: %s" % (name, state["why"])) if r)
    try:
        result = decide(request, facts, setup, recorded_choice)
    except PathsError as exc:
        exc.result["canaries"] = states
        raise
    result["canaries"] = states
    return result


def decide(request, facts, setup, recorded_choice=None):
    """The verdict for ``request`` (one of REQUESTS). Raises PathsError when an explicit path cannot run.

    'auto' lists every runnable candidate for the benchmark gate to measure. It selects the path the gate recorded
    as the winner (``recorded_choice``: the text of the choice file, None when there is none) while the candidates
    are the ones it was measured among; otherwise what the deployment did before paths existed: fusion where it can
    run, else NCCL (and the gate decides again).
    """
    if request not in REQUESTS:
        raise PathsError("path must be one of %s, got %r" % (", ".join(REQUESTS), request))
    setup = validate_setup(setup)
    candidates = [_candidate(path, facts, setup) for path in AUTO_ORDER]
    by_path = dict((c["path"], c) for c in candidates)
    result = {
        "requested": request,
        "facts": facts,
        "candidates": [c["path"] for c in candidates if c["runnable"]],
        "refused": dict((c["path"], c["reasons"]) for c in candidates if not c["runnable"]),
        "paths": by_path,
    }
    if request == "auto":
        data, problem = ac.parse(recorded_choice)
        measured, reason = ac.recorded_path(data, problem, result["candidates"])
        result["measured"] = measured is not None
        if measured:
            chosen = by_path[measured]
            result["why"] = "auto: %s" % reason
        else:
            chosen = by_path["fusion"] if by_path["fusion"]["runnable"] else by_path["nccl"]
            result["why"] = "auto before measurement (%s): %s" % (reason, (
                "fusion can run here (the benchmark gate may pick another candidate)" if chosen["path"] == "fusion"
                else "fusion cannot run here (%s); NCCL" % "; ".join(by_path["fusion"]["reasons"])))
    else:
        chosen = by_path[request]
        if not chosen["runnable"]:
            raise PathsError("all-reduce path %s cannot run with sglang %s / flashinfer-python %s at tp_size %d: %s" % (
                request, facts["sglang_version"], facts["flashinfer_version"], setup["tp_size"],
                "; ".join(chosen["reasons"])), result)
        result["why"] = "requested explicitly"
    result.update(path=chosen["path"], server_args=chosen["server_args"], environment=chosen["environment"],
                  notes=chosen["notes"])
    return result
