"""The canary's judgement, shapes and SGLang-call reading, on CPUs (no torch): planted failures must fail it."""
import json
import os
import subprocess
import sys

import pytest
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "roles", "sglang_allreduce", "files", "allreduce_canary.py")
canary = load_file("roles/sglang_allreduce/files/allreduce_canary.py", "fusion_canary_under_test")

TODAY = [1, 2, 4, 8, 16, 32, 64, 128]


def rank_rows(world, **planted):
    """Clean per-rank rows; planted={rank: dict(bad=.., nonfinite=.., max_abs_err=..)}."""
    rows = [{"rank": r, "bad": 0, "nonfinite": 0, "max_abs_err": 0.0078} for r in range(world)]
    for rank, values in planted.items():
        rows[int(rank.lstrip("r"))].update(values)
    return rows


def clean_run(world, tokens):
    return [{"tokens": t, "phase": phase, "ranks": rank_rows(world)} for t in tokens for phase in ("eager", "graph x6")]


def test_speculative_shapes_are_graph_batches_times_draft_tokens_up_to_the_maximum():
    assert canary.shapes(TODAY, 4, 16) == sorted(set(TODAY) | {4 * b for b in range(1, 17)})
    assert canary.shapes([1], 4, 8, graph_batch_sizes=[1, 2, 8, 16, 32]) == [1, 4, 8, 32]
    assert canary.shapes([1, 8], None, 16) == [1, 8]  # no speculation: today's sizes only
    for bad in (dict(draft_tokens=4), dict(draft_tokens=0, max_batch=4), dict(draft_tokens=4, max_batch=0)):
        with pytest.raises(canary.CanaryError):
            canary.shapes(TODAY, **bad)


def test_arguments_take_the_speculative_settings():
    args = canary.parse_args(["--out", "x", "--tokens", "1,8", "--draft-tokens", "3", "--max-batch", "4"])
    assert args.tokens == [1, 3, 6, 8, 9, 12] and args.path == "fusion"
    assert args.trigger_completion_at_end == "sglang" and args.use_oneshot == "sglang"
    assert canary.parse_args(["--out", "x", "--path", "pcie_ipc"]).path == "pcie_ipc"
    for bad in (["--draft-tokens", "4"], ["--graph-batch-sizes", "1,x", "--draft-tokens", "2"], ["--chain", "0"],
                ["--path", "nvls"]):
        with pytest.raises(SystemExit):
            canary.parse_args(["--out", "x"] + bad)


@pytest.mark.parametrize("world", [2, 4, 8])
def test_a_clean_run_passes_at_any_gpu_count(world):
    verdict = canary.judge(clean_run(world, canary.shapes(TODAY, 4, 16)), world_size=world)
    assert verdict["passed"] and verdict["failed_ranks"] == [] and verdict["max_abs_err"] == 0.0078


@pytest.mark.parametrize("world", [2, 4, 8])
def test_a_nan_at_a_speculative_shape_fails_it(world):
    sizes = clean_run(world, canary.shapes(TODAY, 4, 16))
    target = [s for s in sizes if s["tokens"] == 12 and s["phase"].startswith("graph")][0]  # 3 requests x 4 drafts
    target["ranks"] = rank_rows(world, r1=dict(nonfinite=3))
    verdict = canary.judge(sizes, world_size=world)
    assert not verdict["passed"] and verdict["failed_tokens"] == [12] and verdict["failed_ranks"] == [1]
    assert "NaN/Inf" in verdict["problems"][0] and "rank 1" in verdict["problems"][0]
    assert "FAILED" in canary.summary_line(dict(verdict, sizes=sizes, world_size=world))


def test_a_nan_error_figure_alone_fails_it():
    sizes = clean_run(2, [4])
    sizes[0]["ranks"][0]["max_abs_err"] = float("nan")
    assert not canary.judge(sizes, world_size=2)["passed"]


@pytest.mark.parametrize("world,bad_rank", [(2, 1), (4, 3), (8, 5)])
def test_a_corrupted_rank_fails_it_and_is_named(world, bad_rank):
    sizes = clean_run(world, TODAY)
    for entry in sizes:
        entry["ranks"] = rank_rows(world, **{"r%d" % bad_rank: dict(bad=1, max_abs_err=14.6)})
    verdict = canary.judge(sizes, world_size=world)
    assert not verdict["passed"] and verdict["failed_ranks"] == [bad_rank] and verdict["failed_tokens"] == TODAY
    assert verdict["max_abs_err"] == 14.6


def test_a_rank_that_did_not_report_fails_it():
    sizes = clean_run(4, [8])
    sizes[1]["ranks"] = sizes[1]["ranks"][:3]
    verdict = canary.judge(sizes, world_size=4)
    assert not verdict["passed"] and "3 of 4 ranks" in verdict["problems"][0]


def test_skipped_shapes_are_not_judged_but_nothing_checked_is_a_failure():
    sizes = clean_run(2, [4]) + [{"tokens": 1, "phase": "eager", "skipped": "two-shot needs tokens > world size"}]
    assert canary.judge(sizes, world_size=2)["passed"]
    assert not canary.judge(sizes[-1:], world_size=2)["passed"]


def fusion_source(trigger="False", fp32="True", pdl="True", extra=""):
    return (
        "def flashinfer_allreduce_residual_rmsnorm(input_tensor, residual, weight, eps=1e-6, max_token_num=2048,\n"
        "        use_oneshot=None, trigger_completion_at_end=%s, fp32_acc=%s, use_attn_tp_group=True):\n"
        "    kwargs = dict(input=input_tensor, launch_with_pdl=%s, use_oneshot=use_oneshot)\n"
        "    kwargs['fp32_acc'] = fp32_acc\n"
        "    kwargs['trigger_completion_at_end'] = trigger_completion_at_end\n"
        "    _flashinfer_comm.allreduce_fusion(**kwargs)\n%s" % (trigger, fp32, pdl, extra))


def test_sglang_call_is_read_from_the_function_and_its_caller():
    texts = {canary.SG_FUSION: fusion_source(),
             "sglang/srt/layers/layernorm.py": "r = flashinfer_allreduce_residual_rmsnorm(input_tensor=x, "
                                               "trigger_completion_at_end=True)\n",
             "sglang/srt/layers/communicator.py": "FUSE_ALLREDUCE_MAX_BATCH_SIZE = 1024\n"}
    call = canary.sglang_call(texts)
    assert call["trigger_completion_at_end"] is True and call["caller_overrides"] == ["trigger_completion_at_end"]
    assert call["use_oneshot"] is None and call["fp32_acc"] is True and call["launch_with_pdl"] is True
    assert call["workspace_tokens"] == 1024 and call["passes_trigger"] and call["ar_only"] is None


def test_sglang_call_refuses_a_layout_it_does_not_understand():
    for texts in ({}, {canary.SG_FUSION: "def other():\n    pass\n"},
                  {canary.SG_FUSION: "def flashinfer_allreduce_residual_rmsnorm(x, fp32_acc=True):\n    pass\n"}):
        with pytest.raises(canary.CanaryError):
            canary.sglang_call(texts)


@pytest.mark.parametrize("setting,sglang_value,oneshot,expected", [
    ("sglang", False, True, False), ("vllm", False, True, True), ("vllm", False, False, False),
    ("true", False, False, True), ("false", True, True, False)])
def test_trigger_completion_settings(setting, sglang_value, oneshot, expected):
    assert canary.effective_trigger(setting, sglang_value, oneshot) is expected


def test_without_sglang_source_it_fails_before_touching_a_gpu(tmp_path):
    out = tmp_path / "canary.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--sglang-site", str(tmp_path), "--out", str(out)],
                          capture_output=True, text=True, check=False)
    result = json.loads(out.read_text())
    assert proc.returncode == 2 and not result["passed"] and "holds no sglang/" in result["summary"]


def test_the_summary_says_why_a_kernel_could_not_be_proven():
    result = {"path": "pcie_ipc", "world_size": 2, "sizes": [], "passed": False, "problems": [],
              "kernel": {"error": "this FlashInfer has no PcieIpcAllReduceWorkspace (needs >= 0.7.0)"}}
    line = canary.summary_line(result)
    assert line.startswith("pcie_ipc canary FAILED on 2 GPU(s)") and "needs >= 0.7.0" in line
    assert not canary.judge([], world_size=2)["passed"]


PCIE_SOURCE = (
    "_SUPPORTED_WORLD_SIZES = (2, 4, 8)\n_FALLBACK_DECODE_WIDTH = 48\n\n"
    "def _tune_batches(max_rows):\n"
    "    rows = [r for r in (1, 2, 4, 8, 16, 32, 64) if r <= max_rows]\n"
    "    if max_rows >= 1 and max_rows not in rows:\n        rows.append(max_rows)\n    return tuple(rows)\n")


def test_pcie_ipc_sizing_is_read_from_the_release():
    assert canary.sglang_pcie_sizing(PCIE_SOURCE) == {"fallback_width": 48, "tune_rows": (1, 2, 4, 8, 16, 32, 64)}
    for text in ("", "_FALLBACK_DECODE_WIDTH = 48\n", "def _tune_batches(m):\n    return (1, 2)\n"):
        with pytest.raises(canary.CanaryError):
            canary.sglang_pcie_sizing(text)


@pytest.mark.parametrize("override,max_batch,draft,rows,tune,sized_by", [
    (None, 16, 4, 64, [1, 2, 4, 8, 16, 32, 64], "CUDA-graph max batch x draft tokens"),  # Kimi-K2.5's sizing
    (None, 12, None, 12, [1, 2, 4, 8, 12], "CUDA-graph max batch x draft tokens"),        # no speculation: 1 row
    (None, None, None, 48, [1, 2, 4, 8, 16, 32, 48], "the release's fallback width"),
    (20 * 7168, 16, 4, 20, [1, 2, 4, 8, 16, 20], "SGLANG_PCIE_IPC_MAX_NUMEL"),            # the role's value wins
])
def test_pcie_ipc_workspace_is_sized_as_sglang_sizes_it(override, max_batch, draft, rows, tune, sized_by):
    sizing = canary.sglang_pcie_sizing(PCIE_SOURCE)
    sized = canary.pcie_workspace(sizing, 7168, override, max_batch, draft)
    assert sized == {"max_numel": rows * 7168, "rows": rows, "tune_batches": tune, "sized_by": sized_by}


def test_the_pcie_ipc_canary_without_sglangs_pcie_ipc_fails_before_touching_a_gpu(tmp_path):
    (tmp_path / "sglang").mkdir()
    out = tmp_path / "canary.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--path", "pcie_ipc", "--sglang-site", str(tmp_path),
                           "--out", str(out)], capture_output=True, text=True, check=False)
    result = json.loads(out.read_text())
    assert proc.returncode == 2 and not result["passed"]
    assert result["summary"].startswith("pcie_ipc canary FAILED") and "no PCIe IPC all-reduce" in result["summary"]
