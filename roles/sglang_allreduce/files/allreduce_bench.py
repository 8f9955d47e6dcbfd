#!/usr/bin/env python3
"""All-reduce latency at verify-step sizes, inside CUDA graphs (as SGLang runs decode), one process per GPU:
    python -m torch.distributed.run --nproc-per-node N allreduce_bench.py --label current --out bench.json

NCCL reads its environment once, at init: compare settings by running this once per setting (the role runs it
with the venv's NCCL hook, i.e. the deployed settings, and once with NCCL's defaults). Where the venv's FlashInfer
has PcieIpcAllReduceWorkspace (>= 0.7.0) and the GPU count is 2, 4 or 8, the same sizes are also timed through it
(workspace sized for the largest size, tuned as SGLang's pcie_ipc_ar.py tunes it unless --no-pcie-ipc-tune): a
second row per run, "<label> pcie_ipc". Importable without torch.
"""
import argparse
import json
import os
import sys

# The timer is installed beside this script (sglang_allreduce's tools entry point): found from here, whoever runs it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_graph_timer import graph_time_us, slowest_rank_us  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--tokens", default=",".join(str(t) for t in DEFAULT_TOKENS))
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--label", default="current", help="name of this run's NCCL setting")
    parser.add_argument("--pcie-ipc", choices=("auto", "off"), default="auto",
                        help="auto: also time FlashInfer's PCIe IPC all-reduce where the installed FlashInfer has it")
    parser.add_argument("--no-pcie-ipc-tune", action="store_true", help="keep FlashInfer's seed tactics")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        args.tokens = sorted({int(t) for t in str(args.tokens).split(",") if t.strip()})
    except ValueError:
        parser.error("--tokens must be comma-separated integers")
    if not args.tokens or args.tokens[0] < 1:
        parser.error("--tokens must be positive")
    return args


def columns(runs):
    """(heading, run, field) per column: each run's NCCL figures, and its PCIe IPC figures where it has them."""
    found = []
    for run in runs:
        found.append(("%s, us" % run["label"], run, "us"))
        if any(s.get("pcie_ipc_us") is not None for s in run["sizes"]):
            found.append(("%s pcie_ipc, us" % run["label"], run, "pcie_ipc_us"))
    return found


def table(runs):
    """Markdown table: tokens x run label (plus a pcie_ipc column where measured), latency in us."""
    cols = columns(runs)
    tokens = sorted({s["tokens"] for run in runs for s in run["sizes"]})
    lines = ["| tokens | bytes | " + " | ".join(heading for heading, _r, _f in cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for count in tokens:
        cells = []
        size_bytes = None
        for _heading, run, field in cols:
            match = [s for s in run["sizes"] if s["tokens"] == count]
            value = match[0].get(field) if match else None
            cells.append("%.2f" % value if value is not None else "-")
            size_bytes = size_bytes or (match[0]["bytes"] if match else None)
        lines.append("| %d | %s | %s |" % (count, size_bytes, " | ".join(cells)))
    return "\n".join(lines)


def time_graph(torch, dist, fn, iters, reps):
    """Slowest rank's mean time of fn() inside a CUDA graph (iters calls per graph, replayed reps times)."""
    return round(slowest_rank_us(torch, dist, graph_time_us(torch, fn, iters, reps)), 2)


def pcie_ipc_workspace(torch, dist, args, world):
    """(workspace or None, why): PcieIpcAllReduceWorkspace built and tuned as SGLang's pcie_ipc_ar.py does."""
    if args.pcie_ipc == "off":
        return None, "off"
    if world not in (2, 4, 8):
        return None, "world size %d: PCIe IPC supports 2, 4, 8" % world
    try:
        from flashinfer.comm import PcieIpcAllReduceWorkspace
    except ImportError as exc:
        return None, "FlashInfer has no PcieIpcAllReduceWorkspace (needs >= 0.7.0): %s" % exc
    try:
        from flashinfer.comm.pcie_ipc_tuning import default_cache_path
        cache = str(default_cache_path(world))
    except (ImportError, AttributeError):
        cache = None
    rows = max(args.tokens)
    batches = sorted({r for r in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if r <= rows} | {rows})
    workspace = PcieIpcAllReduceWorkspace(group=dist.group.WORLD, max_numel=rows * args.hidden,
                                          dtype=torch.bfloat16, tune_batches=tuple(batches), tune_cache=cache)
    if not args.no_pcie_ipc_tune:
        workspace.tune([args.hidden], dtype=torch.bfloat16, tune_group=dist.new_group(backend="gloo"))
    workspace.prepare([(t, args.hidden) for t in args.tokens], dtype=torch.bfloat16)
    return workspace, "tuned" if not args.no_pcie_ipc_tune else "seed tactics"


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])  # any count; pcie_ipc: 2, 4, 8
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    workspace, pcie_note = pcie_ipc_workspace(torch, dist, args, world)
    bound = {"stream": None}

    def pcie_reduce(buf, out):
        stream = torch.cuda.current_stream()
        if bound["stream"] is None or stream != bound["stream"]:
            workspace.rebind_stream()  # one workspace serves one stream, as SGLang rebinds it
            bound["stream"] = stream
        workspace.all_reduce(buf, out=out)

    sizes = []
    for count in args.tokens:
        buf = torch.randn(count, args.hidden, device="cuda", dtype=torch.bfloat16)
        entry = {"tokens": count, "bytes": count * args.hidden * 2,
                 "us": time_graph(torch, dist, lambda: dist.all_reduce(buf), args.iters, args.reps),
                 "pcie_ipc_us": None}
        if workspace is not None and workspace.supports(buf):
            out = torch.empty_like(buf)
            entry["pcie_ipc_us"] = time_graph(torch, dist, lambda: pcie_reduce(buf, out), args.iters, args.reps)
        sizes.append(entry)
    if rank == 0:
        result = {"tool": "allreduce_bench", "label": args.label, "world_size": world, "hidden": args.hidden,
                  "dtype": "bfloat16", "gpu": torch.cuda.get_device_name(local),
                  "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()), "torch": torch.__version__,
                  "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
                  "pcie_ipc": pcie_note, "sizes": sizes}
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
        print(table([result]), flush=True)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # skip NCCL teardown: with graph-captured collectives it can hang (seen on 2x H200)


if __name__ == "__main__":
    sys.exit(main())
