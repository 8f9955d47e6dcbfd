"""scripts/device/allreduce_evidence_check.py: what a device bundle of the all-reduce canaries and microbenchmark must
show to count as the evidence of issues #15 and #16, at 2, 4 and 8 GPUs; and every committed bundle
(tests/fixtures/device/h200x<N>_allreduce_canary.json, allreduce_canary_evidence.sh's bundle from a real run) held
to it.

The bundles below are built in tests (tests/helpers/allreduce_bundles.py) to show the checker accepts a complete run
and names each way a run falls short; none of them is evidence of anything on a GPU.
"""
import copy
import glob
import json
import os

import pytest
from tests.helpers.allreduce_bundles import (SPECULATIVE, canary, canary_result, checker, complete_bundle,
                                             rehearsal_bundle)
from tests.helpers.ansible_run import REPO

FIXTURES = sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", "device", "h200x*_allreduce_canary.json")))


def load_bundle(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def problems(bundle):
    return "\n".join(checker.check(bundle, canary)["problems"])


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_a_complete_run_is_evidence(gpus):
    verdict = checker.check(complete_bundle(gpus), canary)
    assert verdict == {"gpus": gpus, "passed": True, "problems": [], "findings": [
        "canary_vllm_trigger: passed", "canary_consumer_sglang: passed", "canary_consumer_vllm: passed",
        "canary_oneshot: passed", "canary_twoshot: passed"]}


def test_a_nan_at_a_speculative_shape_fails_sglangs_call_and_names_the_hazard_when_vllms_setting_passed():
    bundle = complete_bundle(8)
    shape = SPECULATIVE[-1]
    row = next(s for s in bundle["results"]["canary_sglang_call"]["sizes"]
               if s["tokens"] == shape and s["phase"].startswith("graph"))
    row["ranks"][5]["nonfinite"] = 3
    bundle["results"]["canary_sglang_call"].update(canary.judge(bundle["results"]["canary_sglang_call"]["sizes"]))
    verdict = checker.check(bundle, canary)
    assert not verdict["passed"]
    assert "canary_sglang_call: did not pass with SGLang's own call: tokens %d (graph x6): 3 NaN/Inf element(s) " \
        "on rank 5" % shape in verdict["problems"][0]
    assert any(f.startswith("NaN hazard shown") for f in verdict["findings"])


def test_a_speculative_shape_not_checked_is_named():
    bundle = complete_bundle(4)
    missing = SPECULATIVE[0]
    result = bundle["results"]["canary_sglang_call"]
    result["sizes"] = [s for s in result["sizes"] if s["tokens"] != missing]
    assert "canary_sglang_call: tokens [%d] not checked (eager)" % missing in problems(bundle)


def test_a_rank_that_did_not_report_fails_it():
    bundle = complete_bundle(4)
    bundle["results"]["canary_sglang_call"]["sizes"][0]["ranks"].pop()
    assert "3 of 4 ranks reported" in problems(bundle)


@pytest.mark.parametrize("step", ["canary_corrupt", "canary_pcie_ipc_corrupt"])
def test_a_corrupted_rank_must_fail_its_canary(step):
    bundle = complete_bundle(2)
    bundle["results"][step] = canary_result("fusion", 2)
    assert "%s: a corrupted rank did not fail it" % step in problems(bundle)
    del bundle["results"][step]
    assert "%s: missing (the canary must be shown to fail)" % step in problems(bundle)


def test_pcie_ipc_absent_from_flashinfer_is_a_problem():
    bundle = complete_bundle(2)
    bundle["results"]["canary_pcie_ipc"] = {"world_size": 2, "passed": False, "sizes": [], "kernel": {
        "error": "this FlashInfer has no PcieIpcAllReduceWorkspace (needs >= 0.7.0)"}}
    for row in bundle["results"]["bench_defaults"]["sizes"]:
        row["pcie_ipc_us"] = None
    text = problems(bundle)
    assert "canary_pcie_ipc: this FlashInfer has no PcieIpcAllReduceWorkspace" in text
    assert "bench_defaults: no pcie_ipc column" in text


def test_each_candidate_row_must_run_with_exactly_its_own_setting():
    name = checker.candidates()[0][0]
    bundle = complete_bundle(8)
    bundle["results"]["bench_" + name]["nccl_env"]["NCCL_DEBUG"] = "INFO"
    del bundle["results"]["bench_" + checker.candidates()[1][0]]
    text = problems(bundle)
    assert "bench_%s: ran with NCCL settings" % name in text
    assert "bench_%s: missing (microbenchmark row %s)" % checker.candidates()[1] in text
    bundle = complete_bundle(8)
    bundle["results"]["bench_defaults"]["nccl_env"] = {}  # multicast not held off
    assert "bench_defaults: ran with NCCL settings {}" in problems(bundle)


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_a_complete_rehearsal_falls_short_only_for_being_one(ranks):
    verdict = checker.check(rehearsal_bundle(ranks), canary)
    assert verdict["gpus"] == 1 and verdict["problems"] == [
        "a rehearsal: %d ranks shared one GPU (SHARED_GPU_RANKS), which shows that the calls run, not what the "
        "kernels do between GPUs" % ranks]


def test_the_shared_gpu_settings_belong_to_a_rehearsal_and_each_of_its_ranks_has_a_host_id():
    bundle = rehearsal_bundle(4)
    del bundle["results"]["bench_defaults"]["nccl_env"]["NCCL_HOSTID"]
    assert "bench_defaults: its ranks shared a GPU without a host id each (NCCL_HOSTID)" in problems(bundle)
    bundle = complete_bundle(4)  # a real run's row with a rehearsal's settings: not NCCL's defaults
    bundle["results"]["bench_defaults"]["nccl_env"].update(checker.shared_gpu_rank_env())
    assert "bench_defaults: ran with NCCL settings" in problems(bundle)


def test_another_gpu_count_a_step_that_ended_otherwise_and_no_spec_are_problems():
    bundle = complete_bundle(8)
    bundle["results"]["canary_pcie_ipc"]["world_size"] = 2
    bundle["steps"] = [line.replace("canary_sglang_call: rc=0", "canary_sglang_call: rc=124")
                       for line in bundle["steps"]]
    del bundle["canary_spec"]
    text = problems(bundle)
    assert "canary_pcie_ipc: world size 2, but the run started 8 rank(s)" in text
    assert "canary_sglang_call: rc 124, expected 0" in text
    assert "canary_spec: the bundle does not say" in text


def test_the_command_line_reads_a_file_and_refuses_an_unreadable_one(tmp_path, capsys):
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(complete_bundle(4)))
    assert checker.main([str(path)]) == 0 and json.loads(capsys.readouterr().out)["passed"]
    assert checker.main([str(tmp_path / "absent.json")]) == 1
    assert "cannot read" in capsys.readouterr().out


@pytest.mark.skipif(not FIXTURES, reason="no multi-GPU run of allreduce_canary_evidence.sh recorded yet: the 2-, 4- "
                    "and 8-GPU kinds were not lent (issues #15, #16)")
@pytest.mark.parametrize("path", FIXTURES or [None])
def test_every_recorded_bundle_is_evidence(path):
    bundle = load_bundle(path)
    gpus = int(os.path.basename(path).split("_")[0][len("h200x"):])
    verdict = checker.check(copy.deepcopy(bundle), canary)
    assert verdict["gpus"] == gpus and verdict["problems"] == []


def test_a_nan_only_where_each_call_reads_the_last_ones_output_is_a_finding_not_a_problem():
    bundle = complete_bundle(4)
    result = bundle["results"]["canary_consumer_sglang"]
    row = next(s for s in result["sizes"] if s["tokens"] == SPECULATIVE[0] and s["phase"].startswith("graph"))
    row["ranks"][0]["nonfinite"] = 8
    result.update(canary.judge(result["sizes"], world_size=4))
    verdict = checker.check(bundle, canary)
    assert verdict["passed"] and verdict["problems"] == []  # SGLang's own call passed: the run is evidence
    hazard = [f for f in verdict["findings"] if f.startswith("NaN hazard shown (canary_consumer_sglang)")]
    assert hazard and "canary_consumer_vllm" in hazard[0]
    assert "canary_consumer_sglang: FAILED: tokens %d (graph x6): 8 NaN/Inf" % SPECULATIVE[0] in "\n".join(
        verdict["findings"])


def test_a_corrupted_canary_that_exited_0_is_a_problem():
    bundle = complete_bundle(2)
    bundle["steps"] = [line.replace("canary_corrupt: rc=1", "canary_corrupt: rc=0") for line in bundle["steps"]]
    assert "canary_corrupt: rc 0, expected 1 or 3" in problems(bundle)


REHEARSALS = sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", "device",
                                          "h200x1_shared*_allreduce_rehearsal.json")))


def rehearsal_ranks(path):
    """The rank count a rehearsal's file name says (h200x1_shared<N>_...)."""
    return int(os.path.basename(path).split("_")[1][len("shared"):])


@pytest.mark.parametrize("path", REHEARSALS, ids=os.path.basename)
def test_each_one_gpu_rehearsal_ran_its_canaries_as_evidence_would_and_is_not_evidence(path):
    """The real runs of 2026-12-04 (2, 4 and 8 ranks sharing one H200, SHARED_GPU_RANKS): SGLang's call at every
    speculative shape and PCIe IPC passed, a corrupted rank failed at every shape it reached (the 2-rank run also
    ran the consumer chains and forced shot modes). What keeps each from being evidence: it is a rehearsal, it
    times nothing, and the steps it left out."""
    ranks = rehearsal_ranks(path)
    bundle = load_bundle(path)
    assert bundle["shared_gpu_ranks"] == ranks
    verdict = checker.check(copy.deepcopy(bundle), canary)
    assert verdict["gpus"] == 1 and not verdict["passed"]
    assert verdict["problems"][0].startswith("a rehearsal: %d ranks shared one GPU" % ranks)
    assert all(" missing " in problem for problem in verdict["problems"][1:]), verdict["problems"]
    results = bundle["results"]
    assert {"canary_sglang_call", "canary_corrupt", "canary_pcie_ipc"} <= set(results)
    assert all(result["world_size"] == ranks for result in results.values())
    oneshot = [s for s in results["canary_sglang_call"]["sizes"] if s.get("oneshot")]
    assert oneshot and all(s["trigger_completion_at_end"] is False for s in oneshot)  # SGLang's hazardous setting
    for step in checker.MUST_FAIL:
        if step in results:
            ran = {s["tokens"] for s in results[step]["sizes"] if not s.get("skipped")}
            assert sorted(ran) == results[step]["failed_tokens"]  # every shape the corrupted rank reached failed


def test_the_rehearsals_cover_2_4_and_8_ranks():
    assert [rehearsal_ranks(path) for path in REHEARSALS] == [2, 4, 8]


def test_the_benchmark_rehearsal_ran_every_row_with_its_own_setting_and_pcie_ipc_tuned():
    """The real run of 2026-12-04 (SHARED_GPU_RANKS=2, STEPS: the JIT build and the benchmark rows): every row ran
    in CUDA graphs at 2 ranks with exactly its own NCCL setting besides the shared ranks' own, and the defaults row
    built, tuned and timed PCIe IPC at every size. Its figures mean nothing (one GPU time-sliced); what keeps it
    from being evidence is that, and the canaries it left out."""
    bundle = load_bundle(os.path.join(REPO, "tests", "fixtures", "device", "h200x1_shared2_bench_rehearsal.json"))
    assert bundle["shared_gpu_ranks"] == 2
    verdict = checker.check(copy.deepcopy(bundle), canary)
    assert verdict["gpus"] == 1 and verdict["problems"][0].startswith("a rehearsal: 2 ranks shared one GPU")
    assert all(problem.startswith("canary_") and " missing" in problem for problem in verdict["problems"][1:])
    rows = {name: row for name, row in bundle["results"].items() if row["tool"] == "allreduce_bench"}
    assert sorted(rows) == sorted(["bench_defaults"] + ["bench_" + name for name, _ in checker.candidates()])
    defaults = rows["bench_defaults"]
    assert defaults["pcie_ipc"] == "tuned" and all(size["pcie_ipc_us"] > 0 for size in defaults["sizes"])
    assert all(row["pcie_ipc"] == "off" for name, row in rows.items() if name != "bench_defaults")
