#!/usr/bin/env python3
"""Fusion canary: does FlashInfer's fused allreduce + residual + RMSNorm give the right answer on THESE GPUs?

Run from the deployed venv, one process per GPU:
    python -m torch.distributed.run --nproc-per-node N fusion_canary.py --hidden 7168 --out canary.json

It calls the same API and backend SGLang uses (flashinfer.comm.create_allreduce_fusion_workspace(backend="trtllm")
and allreduce_fusion(pattern=kARResidualRMSNorm, launch_with_pdl=True, fp32_acc=True)) at verify-step shapes
[tokens, hidden] bf16, and compares with a reference: NCCL all-reduce, then residual add and RMSNorm in fp32 in
PyTorch. Both paths are also timed inside CUDA graphs, as SGLang runs decode.

Tolerance (bf16 has an 8-bit significand: one ulp is 2^-7 relative, 0.0156 at magnitude 2-4, where RMSNorm outputs
with unit gamma live): an element passes when |fused - ref| <= ATOL + RTOL * |ref|, ATOL = RTOL = 2^-5, i.e. about
two ulps. The two paths legitimately differ by rounding: NCCL sums in bf16 in its own order, the fused kernel
accumulates in fp32 (fp32_acc) and rounds once. An empty or wrong kernel is off by orders of magnitude more (a
corrupted input on one rank gave a max error of ~14.6, measured on 2x H200). --corrupt-rank and --wrong-reference
exist to prove the check can fail.

Everything above main() is importable without torch (tests run it on CPUs).
"""
import argparse
import json
import os
import sys
import time

ATOL = 2.0 ** -5
RTOL = 2.0 ** -5
DEFAULT_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=7168, help="hidden size (the model config's hidden_size)")
    parser.add_argument("--tokens", default=",".join(str(t) for t in DEFAULT_TOKENS),
                        help="comma-separated token counts (verify step: 1 to 64+)")
    parser.add_argument("--iters", type=int, default=20, help="ops per CUDA graph when timing")
    parser.add_argument("--reps", type=int, default=20, help="graph replays when timing")
    parser.add_argument("--eps", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--atol", type=float, default=ATOL)
    parser.add_argument("--rtol", type=float, default=RTOL)
    parser.add_argument("--corrupt-rank", type=int, default=None,
                        help="add 100 to one input element on this rank, for the fused path only (must fail)")
    parser.add_argument("--wrong-reference", action="store_true",
                        help="shift the reference by 0.5 (must fail)")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--out", required=True, help="JSON result (written by rank 0)")
    args = parser.parse_args(argv)
    try:
        args.tokens = sorted({int(t) for t in str(args.tokens).split(",") if t.strip()})
    except ValueError:
        parser.error("--tokens must be comma-separated integers, got %r" % args.tokens)
    if not args.tokens or args.tokens[0] < 1:
        parser.error("--tokens must be positive")
    if args.hidden < 1 or args.hidden % 8:
        parser.error("--hidden must be a positive multiple of 8 (the kernels vectorise by 8 bf16)")
    return args


def judge(sizes, atol=ATOL, rtol=RTOL):
    """Overall verdict from per-size results: every size must have zero elements outside tolerance."""
    failures = [s["tokens"] for s in sizes if s["bad_elements"] > 0]
    return {
        "passed": bool(sizes) and not failures,
        "failed_tokens": failures,
        "max_abs_err": max((max(s["max_abs_err_norm"], s["max_abs_err_residual"]) for s in sizes), default=None),
        "tolerance": {"atol": atol, "rtol": rtol,
                      "rule": "|fused - ref| <= atol + rtol * |ref| for every element of norm_out and residual_out"},
    }


def summary_line(result):
    """One human line, for the deploy report."""
    sizes = result.get("sizes", [])
    timed = [s for s in sizes if s.get("fused_us") is not None]
    speed = ""
    if timed:
        speed = "; fused %.1f-%.1f us vs NCCL+add+norm %.1f-%.1f us" % (
            min(s["fused_us"] for s in timed), max(s["fused_us"] for s in timed),
            min(s["reference_us"] for s in timed), max(s["reference_us"] for s in timed))
    return "fusion canary %s on %d GPU(s), tokens %s, max abs error %s%s" % (
        "PASSED" if result.get("passed") else "FAILED", result.get("world_size", 0),
        ",".join(str(s["tokens"]) for s in sizes), result.get("max_abs_err"), speed)


def graph_time_us(torch, fn, iters, reps):
    """Mean time of fn() inside a CUDA graph (iters calls per graph, replayed reps times)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _warmup in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _step in range(iters):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _rep in range(reps):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / (iters * reps)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.distributed as dist
    import flashinfer
    from flashinfer import comm

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    device = torch.device("cuda", local)
    dtype = torch.bfloat16
    hidden, max_tokens = args.hidden, max(args.tokens)

    started = time.monotonic()
    workspace = comm.create_allreduce_fusion_workspace(
        backend="trtllm", world_size=world, rank=rank, max_token_num=max_tokens, hidden_dim=hidden,
        dtype=dtype, gpus_per_node=torch.cuda.device_count(), group=dist.group.WORLD)

    def tensors(tokens):
        gen = torch.Generator(device="cpu").manual_seed(args.seed * 1000 + tokens)
        shared = torch.randn(tokens, hidden, generator=gen).to(device, dtype)     # residual: same on all ranks
        gamma = (1.0 + 0.1 * torch.randn(hidden, generator=gen)).to(device, dtype)
        mine = torch.Generator(device="cpu").manual_seed(args.seed * 1000 + tokens + 7919 * (rank + 1))
        x = (torch.randn(tokens, hidden, generator=mine) / world ** 0.5).to(device, dtype)
        return x, shared, gamma

    def fused(x, residual, gamma, norm_out, residual_out):
        comm.allreduce_fusion(input=x, workspace=workspace, pattern=comm.AllReduceFusionPattern.kARResidualRMSNorm,
                              launch_with_pdl=True, residual_out=residual_out, norm_out=norm_out, residual_in=residual,
                              rms_gamma=gamma, rms_eps=args.eps, use_oneshot=None, fp32_acc=True)

    def reference(x, residual, gamma):
        summed = x.clone()
        dist.all_reduce(summed)
        res = (summed.float() + residual.float()).to(dtype)
        r32 = res.float()
        norm = (r32 * torch.rsqrt(r32.pow(2).mean(-1, keepdim=True) + args.eps) * gamma.float()).to(dtype)
        return norm, res

    sizes = []
    jit_s = None
    for tokens in args.tokens:
        x, residual, gamma = tensors(tokens)
        x_fused = x.clone()
        if args.corrupt_rank == rank:
            x_fused[0, 0] += 100.0
        norm_out, residual_out = torch.empty_like(x), torch.empty_like(x)
        fused(x_fused, residual, gamma, norm_out, residual_out)
        torch.cuda.synchronize()
        if jit_s is None:
            jit_s = round(time.monotonic() - started, 1)  # workspace + first call: includes any JIT build
        norm_ref, res_ref = reference(x, residual, gamma)
        if args.wrong_reference:
            norm_ref = norm_ref + 0.5
        stats = torch.zeros(4, device=device, dtype=torch.float64)
        for i, (got, ref) in enumerate(((norm_out, norm_ref), (residual_out, res_ref))):
            diff = (got.float() - ref.float()).abs()
            stats[i] = diff.max()
            stats[2] += (diff > args.atol + args.rtol * ref.float().abs()).sum()
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        entry = {"tokens": tokens, "max_abs_err_norm": round(stats[0].item(), 6),
                 "max_abs_err_residual": round(stats[1].item(), 6), "bad_elements": int(stats[2].item()),
                 "fused_us": None, "reference_us": None}
        if not args.no_timing:
            entry["fused_us"] = round(graph_time_us(
                torch, lambda: fused(x, residual, gamma, norm_out, residual_out), args.iters, args.reps), 2)
            ref_buf = x.clone()

            def ref_op():
                ref_buf.copy_(x)
                dist.all_reduce(ref_buf)
                res = ref_buf.float() + residual.float()
                (res * torch.rsqrt(res.pow(2).mean(-1, keepdim=True) + args.eps) * gamma.float()).to(dtype)

            entry["reference_us"] = round(graph_time_us(torch, ref_op, args.iters, args.reps), 2)
        sizes.append(entry)

    if rank == 0:
        props = torch.cuda.get_device_properties(device)
        result = {
            "tool": "fusion_canary", "world_size": world, "hidden": hidden, "dtype": "bfloat16",
            "gpu": props.name, "compute_capability": "%d.%d" % (props.major, props.minor),
            "torch": torch.__version__, "flashinfer": getattr(flashinfer, "__version__", None),
            "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
            "backend": "trtllm", "pattern": "kARResidualRMSNorm", "fp32_acc": True,
            "first_call_s": jit_s, "corrupt_rank": args.corrupt_rank, "wrong_reference": args.wrong_reference,
            "sizes": sizes,
        }
        result.update(judge(sizes, args.atol, args.rtol))
        result["summary"] = summary_line(result)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
        print(result["summary"], flush=True)
    passed = judge(sizes, args.atol, args.rtol)["passed"]
    dist.barrier()
    if hasattr(workspace, "destroy"):
        workspace.destroy()
    dist.destroy_process_group()
    return 0 if passed else 3


if __name__ == "__main__":
    sys.exit(main())
