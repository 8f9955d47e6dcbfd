#!/usr/bin/env python3
"""The README's table of all-reduce figures measured on GPUs, one column per GPU count (2, 4, 8), generated from the
device fixtures so that the table and the evidence cannot drift apart.

Per GPU count N it reads tests/fixtures/device/h200x<N>_allreduce_canary.json (allreduce_canary_evidence.sh's
bundle: the fusion canary with SGLang's own call, PCIe IPC, NCCL defaults and each candidate NCCL setting), else the
older pair h200x<N>_fusion_canary.json + h200x<N>_fusion_probes.json (fusion_probes_evidence.sh). A count with
neither says "not run"; a row its run did not measure says "-".

    scripts/device/allreduce_figures.py            # rewrite the block between the markers in README.md
    scripts/device/allreduce_figures.py --check    # exit 1 when the block differs from the fixtures
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import readme_block  # noqa: E402  pylint: disable=wrong-import-position
from readme_block import FIXTURES, README  # noqa: E402  pylint: disable=wrong-import-position
BEGIN = "<!-- BEGIN GPU FIGURES: generated from tests/fixtures/device by scripts/device/allreduce_figures.py -->"
END = "<!-- END GPU FIGURES -->"
GPU_COUNTS = (2, 4, 8)
TOKENS = (1, 16, 128)  # one decode token, a speculative verify batch, the largest verify-step size measured


def _load(name):
    return readme_block.load_fixture(FIXTURES, name)


def candidates():
    """nccl-bench-candidates.txt's rows, read where the evidence check reads them."""
    sys.path.insert(0, HERE)
    try:
        import allreduce_evidence_check  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(HERE)
    return allreduce_evidence_check.candidates()


def run_of(gpus):
    """(source files, {'fused', 'reference', 'nccl:<label>', 'pcie_ipc'}: {tokens: us}, canary verdicts) or None."""
    bundle = _load("h200x%d_allreduce_canary.json" % gpus)
    if bundle is not None:
        results = bundle["results"]
        canary = results.get("canary_sglang_call") or {}
        sources = ["h200x%d_allreduce_canary.json" % gpus]
    else:
        canary, probes = _load("h200x%d_fusion_canary.json" % gpus), _load("h200x%d_fusion_probes.json" % gpus)
        if canary is None or probes is None:
            return None
        results = probes["results"]
        sources = ["h200x%d_fusion_canary.json" % gpus, "h200x%d_fusion_probes.json" % gpus]
    eager = [s for s in canary.get("sizes", []) if s.get("phase", "eager") == "eager" and not s.get("skipped")]
    figures = {"fused": {s["tokens"]: s.get("fused_us") for s in eager},
               "reference": {s["tokens"]: s.get("reference_us") for s in eager}}
    for row in results.values():
        if row.get("tool") == "allreduce_bench":
            figures["nccl:" + row["label"]] = {s["tokens"]: s["us"] for s in row["sizes"]}
            if row["label"] == "defaults":
                figures["pcie_ipc"] = {s["tokens"]: s.get("pcie_ipc_us") for s in row["sizes"]}
    corrupt = results.get("canary_corrupt") or {}
    verdicts = "canary %s, corrupted rank %s" % ("passed" if canary.get("passed") else "FAILED",
                                                "failed it" if corrupt and not corrupt.get("passed") else "not shown")
    return sources, figures, verdicts


def _cell(values):
    if values is None:
        return "-"
    shown = [values.get(t) for t in TOKENS]
    if all(v is None for v in shown):
        return "-"
    return " / ".join("-" if v is None else "%.1f" % v for v in shown)


def render():
    runs = {gpus: run_of(gpus) for gpus in GPU_COUNTS}
    rows = [("fused all-reduce + residual + RMSNorm (FlashInfer trtllm)", "fused"),
            ("NCCL all-reduce + add + RMSNorm (what the fusion replaces)", "reference"),
            ("NCCL all-reduce alone, defaults", "nccl:defaults")]
    rows += [("NCCL all-reduce alone, `%s`" % setting, "nccl:" + setting) for _, setting in candidates()]
    rows.append(("FlashInfer PCIe IPC all-reduce", "pcie_ipc"))
    head = "| µs at %s tokens x 7168 bf16, in CUDA graphs | %s |" % (
        " / ".join(str(t) for t in TOKENS), " | ".join("%d GPUs" % g for g in GPU_COUNTS))
    lines = [head, "|---|%s" % ("---|" * len(GPU_COUNTS))]
    for title, key in rows:
        cells = ["not run" if runs[g] is None else _cell(runs[g][1].get(key)) for g in GPU_COUNTS]
        lines.append("| %s | %s |" % (title, " | ".join(cells)))
    lines.append("| fusion canary | %s |" % " | ".join("not run" if runs[g] is None else runs[g][2]
                                                        for g in GPU_COUNTS))
    sources = "; ".join("%d GPUs: %s" % (g, ", ".join("`%s`" % s for s in runs[g][0]))
                        for g in GPU_COUNTS if runs[g] is not None)
    lines += ["", "From `tests/fixtures/device/` (%s). `-`: not measured in that run." % sources]
    return "\n".join(lines)


def main(argv=None):
    return readme_block.main(argv, __doc__, README, BEGIN, END, render, __file__)


if __name__ == "__main__":
    sys.exit(main())
