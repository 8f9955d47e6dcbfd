#!/usr/bin/env python3
"""All-reduce canary: do FlashInfer's kernels give the right answer on THESE GPUs, called the way SGLang calls them?

Run from the deployed venv, one process per GPU (any count FlashInfer supports: 2, 4, 8):
    python -m torch.distributed.run --nproc-per-node N allreduce_canary.py --hidden 7168 --out canary.json
    ... allreduce_canary.py --path pcie_ipc --hidden 7168 --out pcie.json

--path fusion (default): FlashInfer's fused allreduce + residual + RMSNorm (trtllm backend), with the arguments the
INSTALLED SGLang passes, read from its source (never imported): use_oneshot (None = FlashInfer's own one-/two-shot
heuristic), trigger_completion_at_end, fp32_acc, launch_with_pdl and the workspace size (FUSE_ALLREDUCE_MAX_BATCH_SIZE
tokens); where the release has it, also SGLang's allreduce-only call (pattern kAllReduce).
--path pcie_ipc: FlashInfer >= 0.7.0's PcieIpcAllReduceWorkspace as SGLang's pcie_ipc_ar.py drives it (bf16,
tune_batches, tune(), prepare() before capture, rebind_stream() per stream, supports() then all_reduce()), sized as
the installed release sizes it: SGLANG_PCIE_IPC_MAX_NUMEL (--pcie-ipc-max-numel) or the widest decode reduction
(CUDA-graph max batch x draft tokens), else the release's own fallback width; larger shapes go to NCCL there and are
recorded as skipped here.

Shapes: --tokens (the verify-step sizes) plus the speculative ones, CUDA-graph batch sizes x --draft-tokens up to
--max-batch. Each shape is checked eagerly (one call) and inside a CUDA graph (a chain of back-to-back calls,
replayed several times, as decode runs), against NCCL all-reduce (+ residual add + RMSNorm in fp32 in PyTorch).
Every rank reports its own counts. It fails on any NaN or Inf, on any element outside tolerance, on any rank that
does not report. Tolerance: |got - ref| <= ATOL + RTOL * |ref|, ATOL = RTOL = 2^-5 (about two bf16 ulps at the
RMSNorm's output magnitude); an empty or wrong kernel is off by orders of magnitude more (a corrupted input on one
rank gave ~14.6 on 2x H200). --corrupt-rank and --wrong-reference exist to prove the check can fail.

Everything above main() is importable without torch (tests run it on CPUs).
"""
import argparse
import ast
import importlib.util
import json
import math
import os
import sys
import time

# The timer is installed beside this script (sglang_allreduce's tools entry point): found from here, whoever runs it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_graph_timer import graph_time_us  # noqa: E402  pylint: disable=wrong-import-position

ATOL = 2.0 ** -5
RTOL = 2.0 ** -5
DEFAULT_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128)
SG_FUSION = "sglang/srt/layers/flashinfer_comm_fusion.py"
SG_CALLERS = ("sglang/srt/layers/layernorm.py",)
SG_MAX_BATCH = ("sglang/srt/layers/layer_boundary/residual/add_norm.py", "sglang/srt/layers/communicator.py")
SG_PCIE = "sglang/srt/distributed/device_communicators/pcie_ipc_ar.py"
FUSED_FUNCTION = "flashinfer_allreduce_residual_rmsnorm"
AR_ONLY_FUNCTION = "flashinfer_allreduce"
CALL_KEYS = ("use_oneshot", "trigger_completion_at_end", "fp32_acc")


class CanaryError(Exception):
    """Cannot run as asked (no SGLang source to mirror, bad arguments): say so in the result."""


def _int_list(text, what):
    try:
        values = sorted({int(t) for t in str(text).split(",") if t.strip()})
    except ValueError:
        raise CanaryError("%s must be comma-separated integers, got %r" % (what, text))
    if values and values[0] < 1:
        raise CanaryError("%s must be positive, got %r" % (what, text))
    return values


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=("fusion", "pcie_ipc"), default="fusion",
                        help="which FlashInfer kernel to prove")
    parser.add_argument("--hidden", type=int, default=7168, help="hidden size (the model config's hidden_size)")
    parser.add_argument("--tokens", default=",".join(str(t) for t in DEFAULT_TOKENS),
                        help="comma-separated token counts (today's verify-step sizes)")
    parser.add_argument("--draft-tokens", type=int, default=None,
                        help="speculative_num_draft_tokens: adds CUDA-graph batch sizes x this")
    parser.add_argument("--max-batch", type=int, default=None, help="CUDA-graph max batch size (cuda_graph_max_bs)")
    parser.add_argument("--graph-batch-sizes", default=None,
                        help="CUDA-graph batch sizes (default: every size from 1 to --max-batch)")
    parser.add_argument("--sglang-site", default=None,
                        help="site-packages holding the sglang whose call is mirrored (default: found without import)")
    parser.add_argument("--trigger-completion-at-end", choices=("sglang", "true", "false", "vllm"), default="sglang",
                        help="sglang: what the installed release passes; vllm: true for one-shot (vLLM's fix)")
    parser.add_argument("--use-oneshot", choices=("sglang", "true", "false"), default="sglang",
                        help="sglang: what the installed release passes (None = FlashInfer's heuristic)")
    parser.add_argument("--chain", type=int, default=6, help="back-to-back calls per CUDA graph (>3 cycles the "
                        "Lamport buffers)")
    parser.add_argument("--replays", type=int, default=3, help="graph replays checked for NaN/Inf")
    parser.add_argument("--consumer-chain", action="store_true",
                        help="fusion: also a chain whose every call reads the outputs the call before it wrote (a "
                             "PDL-launched consumer, where vLLM saw the one-shot kernel's NaN); for evidence runs")
    parser.add_argument("--no-tune", action="store_true", help="pcie_ipc: keep FlashInfer's seed tactics")
    parser.add_argument("--pcie-ipc-max-numel", type=int, default=None,
                        help="pcie_ipc: SGLANG_PCIE_IPC_MAX_NUMEL as the server gets it (default: SGLang's sizing)")
    parser.add_argument("--iters", type=int, default=20, help="ops per CUDA graph when timing")
    parser.add_argument("--reps", type=int, default=20, help="graph replays when timing")
    parser.add_argument("--eps", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--atol", type=float, default=ATOL)
    parser.add_argument("--rtol", type=float, default=RTOL)
    parser.add_argument("--corrupt-rank", type=int, default=None,
                        help="add 100 to one input element on this rank, for the kernel only (must fail)")
    parser.add_argument("--wrong-reference", action="store_true", help="shift the reference by 0.5 (must fail)")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--out", required=True, help="JSON result (written by rank 0)")
    args = parser.parse_args(argv)
    try:
        args.tokens = shapes(_int_list(args.tokens, "--tokens"), args.draft_tokens, args.max_batch,
                             _int_list(args.graph_batch_sizes, "--graph-batch-sizes")
                             if args.graph_batch_sizes else None)
    except CanaryError as exc:
        parser.error(str(exc))
    if args.hidden < 1 or args.hidden % 8:
        parser.error("--hidden must be a positive multiple of 8 (the kernels vectorise by 8 bf16)")
    if args.chain < 1 or args.replays < 1:
        parser.error("--chain and --replays must be positive")
    return args


def shapes(tokens, draft_tokens=None, max_batch=None, graph_batch_sizes=None):
    """Token counts to check: today's sizes plus every CUDA-graph batch size x draft tokens, up to max_batch."""
    if draft_tokens is not None and draft_tokens < 1:
        raise CanaryError("--draft-tokens must be positive")
    if max_batch is not None and max_batch < 1:
        raise CanaryError("--max-batch must be positive")
    found = set(tokens)
    if draft_tokens:
        if graph_batch_sizes is None:
            if max_batch is None:
                raise CanaryError("--draft-tokens needs --max-batch or --graph-batch-sizes")
            graph_batch_sizes = range(1, max_batch + 1)
        found |= {bs * draft_tokens for bs in graph_batch_sizes if max_batch is None or bs <= max_batch}
    if not found:
        raise CanaryError("no token counts to check")
    return sorted(found)


# --- reading how the installed SGLang calls the kernels (source, never imported) ---------------------------

def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def _function(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _defaults(func):
    args = func.args.args
    found = dict((a.arg, _literal(d)) for a, d in zip(args[len(args) - len(func.args.defaults):], func.args.defaults))
    found.update((a.arg, _literal(d)) for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults) if d is not None)
    return found


def _passed(func):
    """{keyword: literal or name} that the function passes to FlashInfer's allreduce_fusion (dict(...) or kwargs[...])."""
    passed = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
            passed.update((k.arg, _literal(k.value)) for k in node.keywords if k.arg)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "allreduce_fusion":
            passed.update((k.arg, _literal(k.value)) for k in node.keywords if k.arg)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            key = node.targets[0].slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                passed[key.value] = _literal(node.value)
    return passed


def sglang_call(texts):
    """How the installed SGLang calls FlashInfer's fused kernel, from {relative path: source text}. Pure.

    Returns {use_oneshot, trigger_completion_at_end, fp32_acc, launch_with_pdl, workspace_tokens, ar_only, source}:
    the fused function's defaults, overridden by what its caller (layernorm.py) passes, and what it hands on.
    """
    text = texts.get(SG_FUSION)
    if text is None:
        raise CanaryError("no %s: this sglang has no FlashInfer fusion to mirror" % SG_FUSION)
    tree = ast.parse(text)
    func = _function(tree, FUSED_FUNCTION)
    if func is None:
        raise CanaryError("%s has no %s(): this layout is not understood" % (SG_FUSION, FUSED_FUNCTION))
    call = dict((key, value) for key, value in _defaults(func).items() if key in CALL_KEYS)
    caller_overrides = {}
    for rel in SG_CALLERS:
        if rel not in texts:
            continue
        for node in ast.walk(ast.parse(texts[rel])):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == FUSED_FUNCTION:
                caller_overrides.update((k.arg, _literal(k.value)) for k in node.keywords if k.arg in CALL_KEYS)
    call.update(caller_overrides)
    passed = _passed(func)
    missing = [key for key in CALL_KEYS if key not in call]
    if missing:
        raise CanaryError("%s() has no default for %s: this layout is not understood" % (FUSED_FUNCTION, missing))
    call["launch_with_pdl"] = passed.get("launch_with_pdl", False) is True
    call["passes_trigger"] = "trigger_completion_at_end" in passed
    workspace_tokens = None
    for rel in SG_MAX_BATCH:
        for node in ast.parse(texts.get(rel, "")).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FUSE_ALLREDUCE_MAX_BATCH_SIZE"
                                                    for t in node.targets):
                workspace_tokens = _literal(node.value)
    call["workspace_tokens"] = workspace_tokens if isinstance(workspace_tokens, int) else 2048
    ar_only = _function(tree, AR_ONLY_FUNCTION)
    call["ar_only"] = None
    if ar_only is not None:
        fixed = _passed(ar_only)
        call["ar_only"] = {"fp32_acc": fixed.get("fp32_acc", False) is True,
                           "trigger_completion_at_end": fixed.get("trigger_completion_at_end", True) is True,
                           "launch_with_pdl": fixed.get("launch_with_pdl", False) is True}
    call["caller_overrides"] = sorted(caller_overrides)
    return call


def sglang_pcie_sizing(text):
    """How the installed SGLang sizes PCIe IPC's workspace, from pcie_ipc_ar.py's source. Pure.

    Returns {fallback_width, tune_rows}: the rows it falls back to without a decode config, and the row counts its
    _tune_batches() profiles (those up to the workspace's rows, plus that count).
    """
    tree = ast.parse(text)
    fallback = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_FALLBACK_DECODE_WIDTH"
                                                for t in node.targets):
            fallback = _literal(node.value)
    func = _function(tree, "_tune_batches")
    rows = None
    for node in ast.walk(func) if func is not None else ():
        if isinstance(node, ast.Tuple) and node.elts and all(isinstance(e, ast.Constant) for e in node.elts):
            rows = tuple(_literal(node))
    if not isinstance(fallback, int) or not rows or not all(isinstance(r, int) for r in rows):
        raise CanaryError("%s: no _FALLBACK_DECODE_WIDTH or _tune_batches() rows: this layout is not understood"
                          % SG_PCIE)
    return {"fallback_width": fallback, "tune_rows": rows}


def pcie_workspace(sizing, hidden, max_numel=None, max_batch=None, draft_tokens=None):
    """{max_numel, rows, tune_batches, sized_by} as SGLang's _ensure_workspace() and _tune_batches() choose. Pure."""
    if max_numel:
        sized_by = "SGLANG_PCIE_IPC_MAX_NUMEL"
    elif max_batch:
        max_numel, sized_by = max_batch * (draft_tokens or 1) * hidden, "CUDA-graph max batch x draft tokens"
    else:
        max_numel, sized_by = sizing["fallback_width"] * hidden, "the release's fallback width"
    rows = max_numel // hidden
    tune = [r for r in sizing["tune_rows"] if r <= rows]
    if rows >= 1 and rows not in tune:
        tune.append(rows)
    return {"max_numel": max_numel, "rows": rows, "tune_batches": tune, "sized_by": sized_by}


def read_sglang_pcie(site):
    path = os.path.join(site, SG_PCIE)
    if not os.path.isfile(path):
        raise CanaryError("no %s: this sglang has no PCIe IPC all-reduce to mirror" % SG_PCIE)
    with open(path, encoding="utf-8") as handle:
        sizing = sglang_pcie_sizing(handle.read())
    sizing["source"] = path
    return sizing


def find_sglang_site(explicit=None):
    """site-packages that holds sglang/, found without importing sglang."""
    if explicit:
        if not os.path.isdir(os.path.join(explicit, "sglang")):
            raise CanaryError("--sglang-site %s holds no sglang/" % explicit)
        return explicit
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise CanaryError("sglang is not installed for this Python: pass --sglang-site")
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def read_sglang_call(site):
    texts = {}
    for rel in (SG_FUSION,) + SG_CALLERS + SG_MAX_BATCH:
        path = os.path.join(site, rel)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                texts[rel] = handle.read()
    call = sglang_call(texts)
    call["source"] = os.path.join(site, SG_FUSION)
    return call


def effective_trigger(setting, sglang_value, oneshot):
    """trigger_completion_at_end to pass: SGLang's own value, a forced one, or vLLM's fix (true for one-shot)."""
    if setting == "sglang":
        return bool(sglang_value)
    if setting == "vllm":
        return bool(oneshot) or bool(sglang_value)
    return setting == "true"


# --- judging (pure) ----------------------------------------------------------------------------------------

def _rank_rows(entry):
    """Per-rank rows of one checked shape; results recorded before per-rank counts are one aggregated row."""
    if "ranks" in entry:
        return entry["ranks"]
    return [{"rank": None, "bad": entry.get("bad_elements", 0), "nonfinite": entry.get("nonfinite", 0),
             "max_abs_err": max(entry.get("max_abs_err_norm") or 0.0, entry.get("max_abs_err_residual") or 0.0)}]


def judge(sizes, atol=ATOL, rtol=RTOL, world_size=None):
    """Overall verdict: every rank of every checked shape reported zero NaN/Inf and zero elements out of tolerance."""
    problems, failed_tokens, failed_ranks, errors = [], [], set(), []
    for entry in sizes:
        if entry.get("skipped"):
            continue
        rows = _rank_rows(entry)
        where = "tokens %s%s" % (entry["tokens"], " (%s)" % entry["phase"] if entry.get("phase") else "")
        bad_here = False
        if world_size and entry.get("ranks") is not None and len(rows) != world_size:
            problems.append("%s: %d of %d ranks reported" % (where, len(rows), world_size))
            bad_here = True
        for row in rows:
            on = "" if row.get("rank") is None else " on rank %d" % row["rank"]
            err = row.get("max_abs_err")
            if row.get("nonfinite", 0) > 0 or (isinstance(err, float) and not math.isfinite(err)):
                problems.append("%s: %d NaN/Inf element(s)%s" % (where, row.get("nonfinite", 0), on))
                bad_here = True
            if row.get("bad", 0) > 0:
                problems.append("%s: %d element(s) outside tolerance%s (max abs error %s)" % (
                    where, row["bad"], on, err))
                bad_here = True
            if bad_here and row.get("rank") is not None and (row.get("bad", 0) or row.get("nonfinite", 0)):
                failed_ranks.add(row["rank"])
            if isinstance(err, (int, float)) and math.isfinite(err):
                errors.append(err)
        if bad_here and entry["tokens"] not in failed_tokens:
            failed_tokens.append(entry["tokens"])
    checked = [entry for entry in sizes if not entry.get("skipped")]
    return {
        "passed": bool(checked) and not problems,
        "failed_tokens": failed_tokens,
        "failed_ranks": sorted(failed_ranks),
        "problems": problems[:20],
        "max_abs_err": max(errors) if errors else None,
        "tolerance": {"atol": atol, "rtol": rtol,
                      "rule": "no NaN/Inf, and |got - ref| <= atol + rtol * |ref| for every element on every rank"},
    }


def summary_line(result):
    """One human line, for the deploy report."""
    sizes = [s for s in result.get("sizes", []) if not s.get("skipped")]
    timed = [s for s in sizes if s.get("fused_us") is not None]
    speed = ""
    if timed:
        speed = "; %s %.1f-%.1f us vs NCCL%s %.1f-%.1f us" % (
            "kernel" if result.get("path") == "pcie_ipc" else "fused",
            min(s["fused_us"] for s in timed), max(s["fused_us"] for s in timed),
            "" if result.get("path") == "pcie_ipc" else "+add+norm",
            min(s["reference_us"] for s in timed), max(s["reference_us"] for s in timed))
    tokens = sorted({s["tokens"] for s in sizes})
    why = "" if result.get("passed") else (": " + "; ".join(result.get("problems", [])[:3]) if result.get("problems")
                                           else "")
    if not result.get("passed") and (result.get("kernel") or {}).get("error"):
        why = ": " + result["kernel"]["error"]
    return "%s canary %s on %d GPU(s), tokens %s, max abs error %s%s%s" % (
        result.get("path", "fusion"), "PASSED" if result.get("passed") else "FAILED", result.get("world_size", 0),
        ",".join(str(t) for t in tokens), result.get("max_abs_err"), speed, why)


# --- on the GPUs ---------------------------------------------------------------------------------------------

class Gpu(object):
    """Process group, inputs, references and per-rank counts shared by both kernels."""

    def __init__(self, args):
        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.args = torch, dist, args
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", self.rank))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        self.device = torch.device("cuda", local)
        self.dtype = torch.bfloat16

    def inputs(self, tokens, salt=0):
        torch, args = self.torch, self.args
        gen = torch.Generator(device="cpu").manual_seed(args.seed * 1000 + tokens + 104729 * salt)
        shared = torch.randn(tokens, args.hidden, generator=gen).to(self.device, self.dtype)  # residual: same on all
        gamma = (1.0 + 0.1 * torch.randn(args.hidden, generator=gen)).to(self.device, self.dtype)
        mine = torch.Generator(device="cpu").manual_seed(args.seed * 1000 + tokens + 7919 * (self.rank + 1)
                                                         + 104729 * salt)
        x = (torch.randn(tokens, args.hidden, generator=mine) / self.world ** 0.5).to(self.device, self.dtype)
        return x, shared, gamma

    def kernel_input(self, x):
        """The input the kernel sees: --corrupt-rank plants a wrong element on one rank."""
        if self.args.corrupt_rank == self.rank:
            x = x.clone()
            x[0, 0] += 100.0
        return x

    def all_reduced(self, x):
        summed = x.clone()
        self.dist.all_reduce(summed)
        return summed

    def reference_norm(self, x, residual, gamma):
        torch = self.torch
        res = (self.all_reduced(x).float() + residual.float()).to(self.dtype)
        r32 = res.float()
        norm = (r32 * torch.rsqrt(r32.pow(2).mean(-1, keepdim=True) + self.args.eps) * gamma.float()).to(self.dtype)
        return norm, res

    def compare(self, pairs):
        """This rank's [bad, nonfinite, max_abs_err over finite] for [(got, ref), ...]."""
        torch, args = self.torch, self.args
        bad = nonfinite = 0
        worst = 0.0
        for got, ref in pairs:
            ref = ref.float() + (0.5 if args.wrong_reference else 0.0)
            got = got.float()
            finite = torch.isfinite(got)
            nonfinite += int((~finite).sum().item())
            diff = (got - ref).abs()
            # written as "not within": a NaN in the reference (NaN compares false) counts as bad too
            bad += int((~(diff <= args.atol + args.rtol * ref.abs()) & finite).sum().item())
            if finite.any():
                worst = max(worst, float(diff[finite].max().item()))
        return [bad, nonfinite, worst]

    def per_rank(self, mine):
        """[{rank, bad, nonfinite, max_abs_err}] of every rank (all-gathered)."""
        torch = self.torch
        local = torch.tensor(mine, dtype=torch.float64, device=self.device)
        gathered = torch.zeros(self.world, 3, dtype=torch.float64, device=self.device)
        self.dist.all_gather_into_tensor(gathered, local)
        return [{"rank": r, "bad": int(row[0]), "nonfinite": int(row[1]), "max_abs_err": round(float(row[2]), 6)}
                for r, row in enumerate(gathered.tolist())]

    def graph_check(self, calls, check):
        """Capture the calls back to back in one CUDA graph, replay it; NaN/Inf counted after every replay."""
        torch = self.torch
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for call in calls:  # warm-up outside the capture
                call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for call in calls:
                call()
        transient = 0
        for _replay in range(self.args.replays):
            graph.replay()
            torch.cuda.synchronize()
            transient = max(transient, check()[1])
        mine = check()
        mine[1] = max(mine[1], transient)
        del graph
        return mine


def _consumer_chain(gpu, args, tokens, fused):
    """A captured chain in which every call after the first takes the previous call's outputs (norm_out as its
    input, residual_out as its residual): each kernel is a PDL-launched consumer of the one before it, the case in
    which vLLM saw the one-shot kernel complete before its output was written (NaN). References are computed after
    each replay from the buffers the calls actually read."""
    torch = gpu.torch
    links = []  # (kernel input, residual, gamma, norm_out, residual_out, reference input)
    for link in range(args.chain):
        x, residual, gamma = gpu.inputs(tokens, salt=link + 1)
        if links:  # not fresh inputs: what the call before this one wrote
            x, residual = links[-1][3], links[-1][4]
        kernel_x = gpu.kernel_input(x) if not links else x
        links.append((kernel_x, residual, gamma, torch.empty_like(x), torch.empty_like(x), x))
    calls = [lambda c=c: fused(c[0], c[1], c[2], c[3], c[4]) for c in links]

    def check():
        pairs = []
        for c in links:
            norm_ref, res_ref = gpu.reference_norm(c[5], c[1], c[2])
            pairs += [(c[3], norm_ref), (c[4], res_ref)]
        return gpu.compare(pairs)

    return {"tokens": tokens, "phase": "graph x%d consumer" % args.chain, "ranks": gpu.per_rank(
        gpu.graph_check(calls, check))}


def _fusion(gpu, args, call):
    """The fused kernel, per shape: eager, then a captured chain; plus SGLang's allreduce-only call if it has one."""
    torch, dist = gpu.torch, gpu.dist
    from flashinfer import comm
    try:
        from flashinfer.comm import trtllm_ar
        heuristic = getattr(trtllm_ar, "_should_use_oneshot", None)
    except ImportError:
        heuristic = None
    workspace_tokens = max(call["workspace_tokens"], *args.tokens)
    workspace = comm.create_allreduce_fusion_workspace(
        backend="trtllm", world_size=gpu.world, rank=gpu.rank, max_token_num=workspace_tokens,
        hidden_dim=args.hidden, dtype=gpu.dtype, gpus_per_node=torch.cuda.device_count(), group=dist.group.WORLD)
    sizes, used = [], {}
    for tokens in args.tokens:
        oneshot = {"sglang": call["use_oneshot"], "true": True, "false": False}[args.use_oneshot]
        chosen = oneshot if oneshot is not None else (
            heuristic(tokens, args.hidden, gpu.dtype, gpu.world) if heuristic else None)
        trigger = effective_trigger(args.trigger_completion_at_end, call["trigger_completion_at_end"], chosen)
        if chosen is False and tokens <= gpu.world:  # FlashInfer asserts token_num > world_size for two-shot
            sizes.append({"tokens": tokens, "phase": "eager", "skipped": "two-shot needs tokens > world size"})
            continue
        used[tokens] = {"oneshot": chosen, "trigger_completion_at_end": trigger}

        def fused(x, residual, gamma, norm_out, residual_out, oneshot=oneshot, trigger=trigger):
            kwargs = dict(input=x, workspace=workspace, pattern=comm.AllReduceFusionPattern.kARResidualRMSNorm,
                          launch_with_pdl=call["launch_with_pdl"], residual_out=residual_out, norm_out=norm_out,
                          residual_in=residual, rms_gamma=gamma, rms_eps=args.eps, use_oneshot=oneshot,
                          fp32_acc=call["fp32_acc"])
            if call["passes_trigger"] or args.trigger_completion_at_end != "sglang":
                kwargs["trigger_completion_at_end"] = trigger
            comm.allreduce_fusion(**kwargs)

        # eager, one call
        x, residual, gamma = gpu.inputs(tokens)
        norm_out, residual_out = torch.empty_like(x), torch.empty_like(x)
        fused(gpu.kernel_input(x), residual, gamma, norm_out, residual_out)
        torch.cuda.synchronize()
        norm_ref, res_ref = gpu.reference_norm(x, residual, gamma)
        entry = {"tokens": tokens, "phase": "eager", "oneshot": chosen, "trigger_completion_at_end": trigger,
                 "ranks": gpu.per_rank(gpu.compare([(norm_out, norm_ref), (residual_out, res_ref)])),
                 "fused_us": None, "reference_us": None}
        if not args.no_timing:
            entry["fused_us"] = round(graph_time_us(
                torch, lambda: fused(x, residual, gamma, norm_out, residual_out), args.iters, args.reps), 2)

            def ref_op(buf=x.clone()):
                buf.copy_(x)
                dist.all_reduce(buf)
                res = buf.float() + residual.float()
                (res * torch.rsqrt(res.pow(2).mean(-1, keepdim=True) + args.eps) * gamma.float()).to(gpu.dtype)

            entry["reference_us"] = round(graph_time_us(torch, ref_op, args.iters, args.reps), 2)
        sizes.append(entry)

        # a chain of back-to-back calls inside one CUDA graph, as decode replays them
        chain = []
        for link in range(args.chain):
            cx, cres, cgamma = gpu.inputs(tokens, salt=link + 1)
            chain.append((gpu.kernel_input(cx), cres, cgamma, torch.empty_like(cx), torch.empty_like(cx),
                          gpu.reference_norm(cx, cres, cgamma)))
        calls = [lambda c=c: fused(c[0], c[1], c[2], c[3], c[4]) for c in chain]
        mine = gpu.graph_check(calls, lambda: gpu.compare(
            [pair for c in chain for pair in ((c[3], c[5][0]), (c[4], c[5][1]))]))
        sizes.append({"tokens": tokens, "phase": "graph x%d" % args.chain, "oneshot": chosen,
                      "trigger_completion_at_end": trigger, "ranks": gpu.per_rank(mine)})
        if args.consumer_chain:
            sizes.append(dict(_consumer_chain(gpu, args, tokens, fused), oneshot=chosen,
                              trigger_completion_at_end=trigger))

        if call["ar_only"]:  # SGLang's allreduce-only call (kAllReduce) on the same workspace
            ar = call["ar_only"]
            out = torch.empty_like(x)
            kwargs = dict(input=gpu.kernel_input(x), workspace=workspace, pattern=comm.AllReduceFusionPattern.kAllReduce,
                          launch_with_pdl=ar["launch_with_pdl"], output=out, fp32_acc=ar["fp32_acc"])
            if call["passes_trigger"]:
                kwargs["trigger_completion_at_end"] = ar["trigger_completion_at_end"]
            comm.allreduce_fusion(**kwargs)
            torch.cuda.synchronize()
            sizes.append({"tokens": tokens, "phase": "allreduce-only", "oneshot": None,
                          "ranks": gpu.per_rank(gpu.compare([(out, gpu.all_reduced(x))]))})
    return sizes, {"workspace_tokens": workspace_tokens, "per_tokens": used}, workspace


def _pcie_ipc(gpu, args, sizing):
    """PcieIpcAllReduceWorkspace the way SGLang's pcie_ipc_ar.py builds, sizes, tunes and calls it."""
    torch, dist = gpu.torch, gpu.dist
    try:
        from flashinfer.comm import PcieIpcAllReduceWorkspace
    except ImportError as exc:  # FlashInfer < 0.7.0: SGLang falls back to NCCL, there is nothing to prove
        return [], {"error": "this FlashInfer has no PcieIpcAllReduceWorkspace (needs >= 0.7.0): %s" % exc}, None
    try:
        from flashinfer.comm.pcie_ipc_tuning import default_cache_path
        cache = str(default_cache_path(gpu.world))
    except (ImportError, AttributeError):
        cache = None
    sized = pcie_workspace(sizing, args.hidden, args.pcie_ipc_max_numel, args.max_batch, args.draft_tokens)
    workspace = PcieIpcAllReduceWorkspace(group=dist.group.WORLD, max_numel=sized["max_numel"],
                                          dtype=gpu.dtype, tune_batches=tuple(sized["tune_batches"]),
                                          tune_cache=cache)
    tuned = None
    if not args.no_tune:
        cpu_group = dist.new_group(backend="gloo")
        tuned = len(workspace.tune([args.hidden], dtype=gpu.dtype, tune_group=cpu_group) or {})
    served = [t for t in args.tokens if t * args.hidden <= sized["max_numel"]]
    workspace.prepare([(t, args.hidden) for t in served], dtype=gpu.dtype)
    bound = {"stream": None}

    def reduce(x, out):
        stream = torch.cuda.current_stream()
        if bound["stream"] is None or stream != bound["stream"]:
            workspace.rebind_stream()
            bound["stream"] = stream
        workspace.all_reduce(x, out=out)

    sizes = []
    for tokens in args.tokens:
        if tokens not in served:  # SGLang's should_pcie_ipc_ar(): numel > max_numel goes to NCCL
            sizes.append({"tokens": tokens, "phase": "eager", "skipped": "above max_numel %d: NCCL" %
                          sized["max_numel"]})
            continue
        x, _residual, _gamma = gpu.inputs(tokens)
        if not workspace.supports(x):  # SGLang sends it to NCCL
            sizes.append({"tokens": tokens, "phase": "eager", "skipped": "workspace.supports() is false: NCCL"})
            continue
        out = torch.empty_like(x)
        reduce(gpu.kernel_input(x), out)
        torch.cuda.synchronize()
        ref = gpu.all_reduced(x)
        entry = {"tokens": tokens, "phase": "eager", "ranks": gpu.per_rank(gpu.compare([(out, ref)])),
                 "fused_us": None, "reference_us": None}
        if not args.no_timing:
            entry["fused_us"] = round(graph_time_us(torch, lambda: reduce(x, out), args.iters, args.reps), 2)
            buf = x.clone()
            entry["reference_us"] = round(graph_time_us(torch, lambda: dist.all_reduce(buf), args.iters,
                                                        args.reps), 2)
        sizes.append(entry)
        chain = []
        for link in range(args.chain):
            cx, _r, _g = gpu.inputs(tokens, salt=link + 1)
            chain.append((gpu.kernel_input(cx), torch.empty_like(cx), gpu.all_reduced(cx)))
        calls = [lambda c=c: reduce(c[0], c[1]) for c in chain]
        mine = gpu.graph_check(calls, lambda: gpu.compare([(c[1], c[2]) for c in chain]))
        sizes.append({"tokens": tokens, "phase": "graph x%d" % args.chain, "ranks": gpu.per_rank(mine)})
        reduce(x, out)  # back on the eager stream for the next shape
    torch.cuda.synchronize()
    info = dict(sized, tune_cache=cache, tuned_shapes=tuned, profile=getattr(workspace, "profile", None))
    return sizes, info, workspace


def main(argv=None):
    args = parse_args(argv)
    call = sizing = None
    try:  # before any GPU work: a canary that cannot mirror SGLang proves nothing
        if args.path == "fusion":
            call = read_sglang_call(find_sglang_site(args.sglang_site))
        else:
            sizing = read_sglang_pcie(find_sglang_site(args.sglang_site))
    except (CanaryError, SyntaxError, OSError) as exc:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"tool": "fusion_canary", "path": args.path, "passed": False,
                       "summary": "%s canary FAILED: cannot read how SGLang calls the kernel: %s" % (args.path, exc)},
                      handle, indent=2)
        print("%s canary: %s" % (args.path, exc), file=sys.stderr)
        return 2
    gpu = Gpu(args)
    torch = gpu.torch
    import flashinfer
    started = time.monotonic()
    if args.path == "fusion":
        sizes, info, workspace = _fusion(gpu, args, call)
    elif gpu.world not in (2, 4, 8):
        sizes, info, workspace = [], {"error": "PCIe IPC supports world sizes 2, 4, 8 only"}, None
    else:
        sizes, info, workspace = _pcie_ipc(gpu, args, sizing)
    verdict = judge(sizes, args.atol, args.rtol, gpu.world)
    if gpu.rank == 0:
        props = torch.cuda.get_device_properties(gpu.device)
        result = {
            "tool": "fusion_canary", "path": args.path, "world_size": gpu.world, "hidden": args.hidden,
            "dtype": "bfloat16", "gpu": props.name, "compute_capability": "%d.%d" % (props.major, props.minor),
            "torch": torch.__version__, "flashinfer": getattr(flashinfer, "__version__", None),
            "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
            "backend": "trtllm" if args.path == "fusion" else "pcie_ipc",
            "pattern": "kARResidualRMSNorm" if args.path == "fusion" else "all_reduce",
            "sglang_call": call, "sglang_pcie_sizing": sizing, "kernel": info,
            "fp32_acc": call["fp32_acc"] if call else None,
            "trigger_setting": args.trigger_completion_at_end, "use_oneshot_setting": args.use_oneshot,
            "chain": args.chain, "replays": args.replays, "first_call_s": round(time.monotonic() - started, 1),
            "corrupt_rank": args.corrupt_rank, "wrong_reference": args.wrong_reference, "sizes": sizes,
        }
        result.update(verdict)
        result["summary"] = summary_line(result)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
        print(result["summary"], flush=True)
    gpu.dist.barrier()
    if workspace is not None and hasattr(workspace, "destroy"):
        workspace.destroy()
    sys.stdout.flush()
    os._exit(0 if verdict["passed"] else 3)  # skip NCCL teardown: with graph-captured collectives it can hang


if __name__ == "__main__":
    sys.exit(main())
