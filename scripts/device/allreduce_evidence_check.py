#!/usr/bin/env python3
"""Does a bundle from allreduce_canary_evidence.sh show what issues #15 and #16 ask of a device run, at any GPU count?

    allreduce_evidence_check.py allreduce_canary_evidence.json

Problems (the run does not count as evidence): the fusion canary with SGLang's own call did not pass at every
configured shape (today's sizes plus CUDA-graph batch x draft tokens, the bundle's canary_spec) on every rank; a
corrupted rank did not fail a canary; PCIe IPC absent or failing; a microbenchmark row missing (NCCL defaults with the pcie_ipc column, each
candidate of nccl-bench-candidates.txt with exactly its own setting); a step that did not end as designed; a result
from another GPU count than the machine's. Findings (reported, not problems): how the comparison canaries (vLLM's
trigger, forced one-/two-shot) ended, and whether SGLang's call showed the NaN hazard that vLLM's setting avoids.
Prints JSON; exit 0 when there is no problem. Pure stdlib: it runs on the device after the steps, and in tests.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CANARY_FILE = os.path.join(REPO, "roles", "sglang_allreduce", "files", "allreduce_canary.py")
CANDIDATES_FILE = os.path.join(HERE, "nccl-bench-candidates.txt")
SHARED_GPU_RANK_FILE = os.path.join(HERE, "shared-gpu-rank.env")
MUST_FAIL = ("canary_corrupt", "canary_pcie_ipc_corrupt")
# A failing canary exits 3; torchrun, which starts one per GPU, exits 1 when any of them fails (seen on the device
# on 2026-12-04; the result file, not the code, tells a failed check from a crash: its failed_tokens).
MUST_FAIL_RCS = (1, 3)
COMPARISONS = ("canary_vllm_trigger", "canary_consumer_sglang", "canary_consumer_vllm", "canary_oneshot",
               "canary_twoshot")
# (SGLang's call, the same with vLLM's trigger): a NaN in the first where the second passed shows the hazard
HAZARD_PAIRS = (("canary_sglang_call", "canary_vllm_trigger"), ("canary_consumer_sglang", "canary_consumer_vllm"))


def load_canary():
    """roles/sglang_allreduce/files/allreduce_canary.py (importable without torch): its shapes() and judge()."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    spec = importlib.util.spec_from_file_location("fusion_canary", CANARY_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def candidates():
    """[(name, 'NCCL_X=value')] from nccl-bench-candidates.txt (the one reader of it in Python)."""
    with open(CANDIDATES_FILE, encoding="utf-8") as handle:
        return [tuple(line.split()) for line in handle if line.strip() and not line.lstrip().startswith("#")]


def _unit_exec():
    sys.path.insert(0, HERE)
    try:
        import unit_exec  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.remove(HERE)
    return unit_exec


def nccl_multicast_off():
    """The NCCL part of multicast-off.env, as unit_exec reads it (what every benchmark row's nccl_env holds besides
    its own setting)."""
    return {k: v for k, v in _unit_exec().MULTICAST_OFF.items() if k.startswith("NCCL_")}


def shared_gpu_rank_env():
    """shared-gpu-rank.env: what each rank of a rehearsal has besides its own NCCL_HOSTID (shared_gpu_rank.sh)."""
    return _unit_exec().read_env_file(SHARED_GPU_RANK_FILE)


def machine_gpus(bundle):
    for line in bundle.get("steps", []):
        found = re.search(r"(\d+) GPU\(s\)", line)
        if found:
            return int(found.group(1))
    return None


def step_rcs(bundle):
    """{step: rc} from the steps log lines 'allreduce_canary: NAME: rc=N wall=...'."""
    rcs = {}
    for line in bundle.get("steps", []):
        found = re.match(r"allreduce_canary: (\w+): rc=(\d+) ", line)
        if found:
            rcs[found.group(1)] = int(found.group(2))
    return rcs


def checked_tokens(result, phase_prefix):
    return {s["tokens"] for s in result.get("sizes", []) if not s.get("skipped")
            and str(s.get("phase", "")).startswith(phase_prefix)}


def check_fusion_sglang_call(result, ranks, expected, canary, problems):
    verdict = canary.judge(result.get("sizes", []), world_size=ranks)
    if not (result.get("passed") and verdict["passed"]):
        problems.append("canary_sglang_call: did not pass with SGLang's own call: %s" % (
            "; ".join(verdict["problems"][:3]) or result.get("summary")))
    if not result.get("sglang_call"):
        problems.append("canary_sglang_call: no SGLang call recorded (the canary must mirror the installed release)")
    for phase in ("eager", "graph"):
        missing = sorted(set(expected) - checked_tokens(result, phase))
        if missing:
            problems.append("canary_sglang_call: tokens %s not checked (%s)" % (missing, phase))


def check_pcie_ipc(result, ranks, canary, problems):
    error = (result.get("kernel") or {}).get("error")
    if error:
        problems.append("canary_pcie_ipc: %s" % error)
        return
    verdict = canary.judge(result.get("sizes", []), world_size=ranks)
    if not (result.get("passed") and verdict["passed"]):
        problems.append("canary_pcie_ipc: did not pass: %s" % ("; ".join(verdict["problems"][:3])
                                                               or result.get("summary")))


def check_bench(results, problems, rehearsal=False):
    """Every row there, each with its own NCCL setting and nothing else (besides multicast off; in a rehearsal, the
    shared-GPU ranks' settings and a host id of each rank's own) and a latency at every size; the pcie_ipc column."""
    common = nccl_multicast_off()  # what every row has besides its own setting
    if rehearsal:
        common.update(shared_gpu_rank_env())
    rows = [("bench_defaults", "defaults", {})] + [
        ("bench_" + name, setting, dict([setting.split("=", 1)])) for name, setting in candidates()]
    tokens = None
    for step, label, own in rows:
        row = results.get(step)
        if row is None:
            problems.append("%s: missing (microbenchmark row %s)" % (step, label))
            continue
        if row.get("label") != label:
            problems.append("%s: label %r, expected %r" % (step, row.get("label"), label))
        env = dict(row.get("nccl_env") or {})
        if rehearsal and not env.pop("NCCL_HOSTID", None):
            problems.append("%s: its ranks shared a GPU without a host id each (NCCL_HOSTID)" % step)
        if env != dict(own, **common):
            problems.append("%s: ran with NCCL settings %s, expected %s" % (step, row.get("nccl_env"),
                                                                          dict(own, **common)))
        sizes = row.get("sizes") or []
        if not sizes or not all(isinstance(s.get("us"), (int, float)) and s["us"] > 0 for s in sizes):
            problems.append("%s: no latency at some size" % step)
        these = [s.get("tokens") for s in sizes]
        if tokens is not None and these != tokens:
            problems.append("%s: sizes %s differ from bench_defaults' %s" % (step, these, tokens))
        tokens = these if step == "bench_defaults" else tokens
    defaults = results.get("bench_defaults") or {}
    if defaults and not any(s.get("pcie_ipc_us") for s in defaults.get("sizes", [])):
        problems.append("bench_defaults: no pcie_ipc column (%s)" % defaults.get("pcie_ipc"))


def findings_of(results):
    found = []
    for step in COMPARISONS:
        if step in results:
            found.append("%s: %s" % (step, "passed" if results[step].get("passed") else
                                     "FAILED: %s" % "; ".join(results[step].get("problems", [])[:2])))
    for sglang_step, vllm_step in HAZARD_PAIRS:
        sglang, vllm = results.get(sglang_step) or {}, results.get(vllm_step) or {}
        nonfinite = [p for p in sglang.get("problems", []) if "NaN/Inf" in p]
        if nonfinite and vllm.get("passed"):
            found.append("NaN hazard shown (%s): SGLang's trigger_completion_at_end gave NaN/Inf (%s) where vLLM's "
                         "setting passed (%s): evidence for the patch site (docs/allreduce-paths.md)" % (
                             sglang_step, nonfinite[0], vllm_step))
    return found


def check(bundle, canary=None):
    """{'gpus', 'passed', 'problems', 'findings'} for one bundle."""
    canary = canary or load_canary()
    results = bundle.get("results") or {}
    problems = []
    spec = bundle.get("canary_spec") or {}
    if not spec:
        problems.append("canary_spec: the bundle does not say which speculative shapes the canaries were given")
    gpus = ranks = machine_gpus(bundle)
    rehearsal = bool(bundle.get("shared_gpu_ranks"))
    if rehearsal:  # judged at its rank count, so that it shows all but the GPUs
        ranks = bundle["shared_gpu_ranks"]
        problems.append("a rehearsal: %s ranks shared one GPU (SHARED_GPU_RANKS), which shows that the calls run, "
                        "not what the kernels do between GPUs" % ranks)
    if gpus is None:
        problems.append("steps: no GPU count logged")
    for step, result in sorted(results.items()):
        if result.get("world_size") != ranks:
            problems.append("%s: world size %s, but the run started %s rank(s)" % (step, result.get("world_size"),
                                                                                ranks))
    rcs = step_rcs(bundle)
    for step in sorted(results):
        want = MUST_FAIL_RCS if step in MUST_FAIL else (() if step in COMPARISONS else (0,))
        if want and rcs.get(step) not in want:
            problems.append("%s: rc %s, expected %s" % (step, rcs.get(step), " or ".join(str(rc) for rc in want)))
    expected = canary.shapes(canary.DEFAULT_TOKENS, spec.get("draft_tokens"), spec.get("max_batch"))
    if "canary_sglang_call" in results:
        check_fusion_sglang_call(results["canary_sglang_call"], ranks, expected, canary, problems)
    else:
        problems.append("canary_sglang_call: missing")
    for step in MUST_FAIL:
        if step not in results:
            problems.append("%s: missing (the canary must be shown to fail)" % step)
        elif results[step].get("passed") or not results[step].get("failed_tokens"):
            problems.append("%s: a corrupted rank did not fail it" % step)
    if "canary_pcie_ipc" in results:
        check_pcie_ipc(results["canary_pcie_ipc"], ranks, canary, problems)
    else:
        problems.append("canary_pcie_ipc: missing")
    check_bench(results, problems, rehearsal=rehearsal)
    return {"gpus": gpus, "passed": not problems, "problems": problems, "findings": findings_of(results)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", help="allreduce_canary_evidence.json")
    args = parser.parse_args(argv)
    try:
        with open(args.bundle, encoding="utf-8") as handle:
            bundle = json.load(handle)
    except (OSError, ValueError) as exc:
        print(json.dumps({"passed": False, "problems": ["cannot read %s: %s" % (args.bundle, exc)]}))
        return 1
    verdict = check(bundle)
    print(json.dumps(verdict, indent=1))
    return 0 if verdict["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
