"""All-reduce evidence bundles built in tests, in the shape allreduce_canary.py, allreduce_bench.py and
allreduce_canary_evidence.sh write them. They show what the checker and the README's table do with a run; none of
them is evidence of anything on a GPU."""
from tests.helpers.script_module import load_file

checker = load_file("scripts/device/allreduce_evidence_check.py", "allreduce_evidence_check")
canary = load_file("roles/sglang_allreduce/files/allreduce_canary.py", "fusion_canary")
SPEC = {"draft_tokens": 4, "max_batch": 16}
SHAPES = canary.shapes(canary.DEFAULT_TOKENS, SPEC["draft_tokens"], SPEC["max_batch"])
SPECULATIVE = sorted(set(SHAPES) - set(canary.DEFAULT_TOKENS))


def canary_result(path, gpus, bad_rank=None):
    """A canary result as allreduce_canary.py writes it: eager and graph rows per shape, one row per rank."""
    sizes = []
    for tokens in SHAPES:
        if path == "pcie_ipc" and tokens > SPEC["max_batch"] * SPEC["draft_tokens"]:  # SGLang sends it to NCCL
            sizes.append({"tokens": tokens, "phase": "eager", "skipped": "above max_numel: NCCL"})
            continue
        for phase in ("eager", "graph x6"):
            sizes.append({"tokens": tokens, "phase": phase, "ranks": [
                {"rank": r, "bad": 7 if r == bad_rank else 0, "nonfinite": 0, "max_abs_err": 0.0078}
                for r in range(gpus)]})
            if phase == "eager":  # timed as the canary times them: kernel vs NCCL (+ add + norm)
                sizes[-1].update({"fused_us": 4.0 + gpus + tokens / 100, "reference_us": 20.0 + gpus + tokens / 10})
    result = {"tool": "fusion_canary", "path": path, "world_size": gpus, "sizes": sizes, "kernel": {},
              "sglang_call": {"use_oneshot": None, "trigger_completion_at_end": False, "fp32_acc": True}
              if path == "fusion" else None}
    result.update(canary.judge(sizes, world_size=gpus))
    return result


def bench_row(label, nccl_env, gpus, pcie_ipc):
    return {"tool": "allreduce_bench", "label": label, "world_size": gpus, "nccl_env": nccl_env,
            "sizes": [{"tokens": t, "us": 10.0 + t, "pcie_ipc_us": 8.0 + t if pcie_ipc else None}
                      for t in canary.DEFAULT_TOKENS]}


def complete_bundle(gpus):
    results = {name: canary_result("fusion", gpus) for name in (
        "canary_sglang_call", "canary_vllm_trigger", "canary_consumer_sglang", "canary_consumer_vllm",
        "canary_oneshot", "canary_twoshot")}
    results["canary_corrupt"] = canary_result("fusion", gpus, bad_rank=1)
    results["canary_pcie_ipc"] = canary_result("pcie_ipc", gpus)
    results["canary_pcie_ipc_corrupt"] = canary_result("pcie_ipc", gpus, bad_rank=1)
    off = checker.nccl_multicast_off()
    results["bench_defaults"] = bench_row("defaults", dict(off), gpus, True)
    for name, setting in checker.candidates():
        results["bench_" + name] = bench_row(setting, dict(off, **dict([setting.split("=", 1)])), gpus, False)
    steps = ["allreduce_canary: python python3, %d GPU(s), sglang source /tmp/site" % gpus] + [
        "allreduce_canary: %s: rc=%d wall=9s" % (name, 1 if name in checker.MUST_FAIL else 0) for name in results]
    return {"steps": steps, "machine": [], "canary_spec": dict(SPEC), "results": results}


def rehearsal_bundle(ranks):
    """complete_bundle as a SHARED_GPU_RANKS rehearsal writes it: one GPU, `ranks` ranks on it, and each benchmark
    row's NCCL settings with the shared-GPU ranks' own (shared_gpu_rank.sh, rank 0 writes the row)."""
    bundle = complete_bundle(ranks)
    bundle["shared_gpu_ranks"] = ranks
    bundle["steps"][0] = bundle["steps"][0].replace("%d GPU(s)" % ranks, "1 GPU(s) shared by %d ranks" % ranks)
    for result in bundle["results"].values():
        if result["tool"] == "allreduce_bench":
            result["nccl_env"].update(checker.shared_gpu_rank_env(), NCCL_HOSTID="shared-gpu-rank-0")
    return bundle
