#!/usr/bin/env python3
"""All-reduce latency at verify-step sizes, inside CUDA graphs (as SGLang runs decode), one process per GPU:
    python -m torch.distributed.run --nproc-per-node N allreduce_bench.py --label current --out bench.json

NCCL reads its environment once, at init: compare settings by running this once per setting (the role runs it
with the venv's NCCL hook, i.e. the deployed settings, and once with NCCL's defaults). Importable without torch.
"""
import argparse
import json
import os
import sys

DEFAULT_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--tokens", default=",".join(str(t) for t in DEFAULT_TOKENS))
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--label", default="current", help="name of this run's NCCL setting")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        args.tokens = sorted({int(t) for t in str(args.tokens).split(",") if t.strip()})
    except ValueError:
        parser.error("--tokens must be comma-separated integers")
    if not args.tokens or args.tokens[0] < 1:
        parser.error("--tokens must be positive")
    return args


def table(runs):
    """Markdown table: tokens x run label, latency in us."""
    labels = [run["label"] for run in runs]
    tokens = sorted({s["tokens"] for run in runs for s in run["sizes"]})
    lines = ["| tokens | bytes | " + " | ".join("%s, us" % label for label in labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for count in tokens:
        cells = []
        size_bytes = None
        for run in runs:
            match = [s for s in run["sizes"] if s["tokens"] == count]
            cells.append("%.2f" % match[0]["us"] if match else "-")
            size_bytes = size_bytes or (match[0]["bytes"] if match else None)
        lines.append("| %d | %s | %s |" % (count, size_bytes, " | ".join(cells)))
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    sizes = []
    for count in args.tokens:
        buf = torch.randn(count, args.hidden, device="cuda", dtype=torch.bfloat16)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _warmup in range(3):
                dist.all_reduce(buf)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _step in range(args.iters):
                dist.all_reduce(buf)
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _rep in range(args.reps):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        us = torch.tensor([start.elapsed_time(end) * 1000.0 / (args.iters * args.reps)], device="cuda")
        dist.all_reduce(us, op=dist.ReduceOp.MAX)  # the slowest rank is what a step waits for
        del graph  # a captured NCCL graph alive at teardown can hang destroy_process_group
        torch.cuda.synchronize()
        sizes.append({"tokens": count, "bytes": count * args.hidden * 2, "us": round(us.item(), 2)})
    if rank == 0:
        result = {"tool": "allreduce_bench", "label": args.label, "world_size": world, "hidden": args.hidden,
                  "dtype": "bfloat16", "gpu": torch.cuda.get_device_name(local),
                  "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()), "torch": torch.__version__,
                  "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
                  "sizes": sizes}
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
        print(table([result]), flush=True)
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)  # skip NCCL teardown: with graph-captured collectives it can hang (seen on 2x H200)


if __name__ == "__main__":
    sys.exit(main())
