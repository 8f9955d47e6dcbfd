"""The fusion proof's judgement (module_utils/fusion_proof.py): each way a server runs unfused fails with its own
reason, only a fused one passes.

The lines are SGLang's own: the preflight pair as the real sglang 0.5.17 server logged it at TP2 on one H200, the
others from the format strings of sglang/srt/layers/flashinfer_comm_fusion.py. LOG_CASES runs the proof on whole
server logs (tests/fixtures/fusion_proof/, composed from those lines; add a captured log there, see below).
"""
import os

import pytest

from ansible.module_utils import fusion_proof as fp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")

PY = "/opt/sglang/current/bin/python"
MODEL = "/srv/models/e2e/target"
UNIT = [PY, "-m", "sglang.launch_server", "--model-path", MODEL, "--tp-size", "2", "--speculative-algorithm", "EAGLE3",
        "--flashinfer-allreduce-fusion-backend", "trtllm", "--config", "/etc/sglang/api-key.yaml"]
# /server_info reports the backend it was given whatever the start did with it (seen on the real 0.5.17).
SERVED = {"tp_size": 2, "model_path": MODEL, "speculative_algorithm": "EAGLE3",
          "flashinfer_allreduce_fusion_backend": "trtllm"}
FUSED = ["DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "Qwen3ForCausalLM"]


def tp(rank, text):
    return "[2026-12-04 15:56:52 TP%d] %s" % (rank, text)


ENABLED = ("FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm, rank=%d, world_size=2, "
           "max_token_num=2048, hidden_dim=2048")
REASON = "cuMulticastGetGranularity failed for FlashInfer workspace preflight: <CUresult.CUDA_ERROR_NOT_SUPPORTED: 801>"
PROBE = "FlashInfer workspace preflight probe failed (%s). Skipping allreduce fusion." % REASON
VOTE = ("FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank. Skipping allreduce fusion to "
        "avoid cross-rank desync inside the flashinfer collective.")
WS_ERROR = "CUDA error: an illegal memory access was encountered"
WS_FAILED = ("Failed to initialize FlashInfer workspace (backend=trtllm): %s. Disabling flashinfer allreduce fusion "
             "permanently." % WS_ERROR)
GLOBALLY = "FlashInfer allreduce fusion disabled globally because workspace initialization failed on at least one rank."
NO_API = ("flashinfer.comm allreduce_fusion API is not available (cannot import name 'allreduce_fusion'), falling "
          "back to standard implementation")

FUSED_LOG = [tp(r, ENABLED % r) for r in (0, 1)] * 2
SKIPPED_LOG = [tp(r, PROBE) for r in (0, 1)] + [tp(r, VOTE) for r in (0, 1)]


def judge(lines, args=UNIT, served=SERVED, architecture="Qwen3ForCausalLM", fused=FUSED, **kw):
    return fp.judge(lines, args, served, architecture=architecture, fused_architectures=fused, **kw)


def codes(verdict):
    return [reason["code"] for reason in verdict["reasons"]]


# ------------------------------------------------------------------------------------------- fused: passes

def test_a_fused_start_passes_and_says_what_it_showed():
    verdict = judge(FUSED_LOG)
    assert verdict["passed"] and verdict["fusion_expected"] and codes(verdict) == []
    assert "fused path set up (backend=trtllm on TP0, TP1)" in verdict["msg"]
    assert "Qwen3ForCausalLM calls the kernel in this release" in verdict["msg"]
    assert "kernel calls not counted (no FlashInfer API log named)" in verdict["msg"]
    assert verdict["evidence"]["enabled_ranks"] == ["TP0", "TP1"]


def test_the_api_log_count_is_positive_evidence():
    calls = {"files": 2, "calls": {"allreduce_fusion": 736, "create_allreduce_fusion_workspace": 4}, "where": "/d/fi-*"}
    verdict = judge(FUSED_LOG, api_calls=calls)
    assert verdict["passed"] and "FlashInfer API log: 736 allreduce_fusion calls in 2 file(s)" in verdict["msg"]
    assert verdict["evidence"]["api_calls"] == {"files": 2, "allreduce_fusion": 736,
                                                "create_allreduce_fusion_workspace": 4}


def test_the_older_releases_workspace_line_counts_as_set_up():
    # sglang 0.5.4-0.5.9 log this instead when the fused path first runs
    verdict = judge([tp(0, "FlashInfer workspace initialized for rank 0, world_size 2")])
    assert verdict["passed"] and verdict["evidence"]["enabled_ranks"] == ["TP0"]


# ----------------------------------------------------------------------------- each way unfused: its own reason

def test_the_preflight_skip_is_named_with_its_reason_quoted():
    verdict = judge(SKIPPED_LOG)
    assert not verdict["passed"] and codes(verdict) == ["preflight_skipped"]
    message = verdict["msg"]
    assert "workspace preflight vote skipped fusion" in message
    assert '"FlashInfer workspace preflight probe failed (%s)" on TP0, TP1' % REASON in message
    assert "fusion_patch_workspace_preflight" in message  # the multicast query: the patch's G3 part is missing
    assert "flashinfer_allreduce_fusion_backend=trtllm" in message  # what /server_info still claims


def test_a_vote_without_this_nodes_probe_line_says_where_the_reason_is():
    verdict = judge([tp(0, VOTE), tp(1, VOTE)])
    assert codes(verdict) == ["preflight_skipped"]
    assert "cuMemCreate probe failed on at least one rank" in verdict["msg"] and "its own log" in verdict["msg"]


def test_a_failed_workspace_is_named_with_its_error():
    verdict = judge([tp(0, WS_FAILED), tp(1, WS_FAILED)])
    assert codes(verdict) == ["workspace_failed"]
    assert "Failed to initialize FlashInfer workspace (backend=trtllm: %s)\" on TP0, TP1" % WS_ERROR in verdict["msg"]
    assert "disabled fusion permanently" in verdict["msg"]
    only_global = judge([tp(0, GLOBALLY)])
    assert codes(only_global) == ["workspace_failed"] and "another rank's" in only_global["msg"]


def test_a_flashinfer_without_the_fusion_api_is_named():
    verdict = judge([tp(0, NO_API)])
    assert codes(verdict) == ["flashinfer_unavailable"] and "cannot import name 'allreduce_fusion'" in verdict["msg"]


def test_a_model_whose_layers_never_call_the_kernel_fails_although_fusion_was_enabled():
    verdict = judge(FUSED_LOG, architecture="LlamaForCausalLM", release="sglang 0.5.17")
    assert codes(verdict) == ["architecture_unfused"]
    assert "LlamaForCausalLM never calls the fused kernel in sglang 0.5.17" in verdict["msg"]
    assert "logs fusion enabled, for every model" in verdict["msg"]
    assert verdict["evidence"]["architecture_fused"] is False


def test_an_unknown_architecture_or_release_is_not_taken_for_fused():
    verdict = judge(FUSED_LOG, architecture=None, architecture_problem="cannot read /m/config.json")
    assert codes(verdict) == ["architecture_unknown"] and "cannot read /m/config.json" in verdict["msg"]
    assert codes(judge(FUSED_LOG, fused=None, architecture_problem="no sglang/")) == ["architecture_unknown"]


def test_a_release_that_never_set_fusion_up_says_the_patch_is_probably_missing():
    for lines in ([], ["[2026-12-04 15:57:31] The server is fired up and ready to roll!"]):
        verdict = judge(lines)
        assert codes(verdict) == ["not_set_up"]
        assert "never set the fused path up" in verdict["msg"]
        assert "fusion patch is probably not applied" in verdict["msg"]


def test_without_require_fusion_log_a_silent_start_passes_but_a_skip_still_fails():
    assert judge([], require_fusion_log=False)["passed"]
    assert "no line on the fused path" in judge([], require_fusion_log=False)["msg"]
    assert codes(judge(SKIPPED_LOG, require_fusion_log=False)) == ["preflight_skipped"]
    assert codes(judge(FUSED_LOG, architecture="LlamaForCausalLM", require_fusion_log=False)) == [
        "architecture_unfused"]


def test_data_parallel_attention_keeps_the_kernel_off():
    verdict = judge(FUSED_LOG, args=UNIT + ["--enable-dp-attention"])
    assert codes(verdict) == ["dp_attention"]


def test_forcibly_disabled_although_the_unit_asks_for_fusion():
    verdict = judge([tp(0, "FlashInfer allreduce fusion is forcibly disabled via "
                           "--enforce-disable-flashinfer-allreduce-fusion.")])
    assert codes(verdict) == ["forced_off"]


def test_the_api_log_must_exist_and_count_a_call():
    missing = judge(FUSED_LOG, api_calls={"files": 0, "calls": {}, "where": "/var/lib/sglang/fi/fi-*.log"})
    assert codes(missing) == ["api_log_missing"] and "FLASHINFER_LOGLEVEL=1" in missing["msg"]
    assert "/var/lib/sglang/fi/fi-*.log" in missing["msg"]
    none = judge(FUSED_LOG, api_calls={"files": 2, "calls": {"create_allreduce_fusion_workspace": 4}, "where": "x"})
    assert codes(none) == ["api_log_no_calls"]
    assert "no allreduce_fusion call (create_allreduce_fusion_workspace: 4)" in none["msg"]


def test_a_workspace_of_another_backend_than_asked():
    lines = [tp(0, (ENABLED % 0).replace("backend=trtllm", "backend=mnnvl"))]
    assert codes(judge(lines)) == ["enabled_backend"]
    auto = [a if a != "trtllm" else "auto" for a in UNIT]
    assert judge(lines, args=auto, served=dict(SERVED, flashinfer_allreduce_fusion_backend="auto"))["passed"]


def test_every_way_at_once_is_reported():
    verdict = judge(SKIPPED_LOG + [tp(0, WS_FAILED)], architecture="LlamaForCausalLM")
    assert codes(verdict) == ["preflight_skipped", "workspace_failed", "architecture_unfused"]


# ------------------------------------------------------------------------------------ served arguments

@pytest.mark.parametrize("served, code", [
    (dict(SERVED, tp_size=1), "served_tp_size"),
    (dict(SERVED, model_path="/srv/other"), "served_model_path"),
    (dict(SERVED, speculative_algorithm=None), "served_speculative_algorithm"),
    (dict(SERVED, flashinfer_allreduce_fusion_backend=None), "served_fusion_backend"),
    ({}, "served_tp_size"),
])
def test_served_arguments_that_differ_from_the_unit(served, code):
    verdict = judge(FUSED_LOG, served=served)
    assert not verdict["passed"] and code in codes(verdict)
    assert verdict["msg"].startswith("serves, but not what its unit starts (tp_size=2, model_path=%s" % MODEL)


# --------------------------------------------------------------------------------- fusion not asked for

@pytest.mark.parametrize("args, why", [
    ([a for a in UNIT if a not in ("--flashinfer-allreduce-fusion-backend", "trtllm")], "passes no fusion flag"),
    (UNIT + ["--enforce-disable-flashinfer-allreduce-fusion"], "keeps fusion off"),
    ([a if a != "2" else "1" for a in UNIT], "tp_size 1"),
])
def test_fusion_is_judged_only_where_a_flag_reaches_several_ranks(args, why):
    served = dict(SERVED, tp_size=fp.unit_settings(args)["tp_size"])
    verdict = judge(SKIPPED_LOG, args=args, served=served, architecture="LlamaForCausalLM", fused=None)
    assert verdict["passed"] and not verdict["fusion_expected"] and why in verdict["msg"]


# ---------------------------------------------------------------------------------------- the unit, the log

def test_exec_start_is_read_from_the_unit():
    unit = "[Service]\nExecStart=-/opt/v/bin/python -m x --model-path '/srv/my model' --tp-size=4\nRestart=no\n"
    args = fp.exec_start_args(unit)
    assert args == ["/opt/v/bin/python", "-m", "x", "--model-path", "/srv/my model", "--tp-size=4"]
    settings = fp.unit_settings(args + ["--enable-flashinfer-allreduce-fusion"])
    assert settings["tp_size"] == 4 and settings["model_path"] == "/srv/my model"
    assert settings["fusion_flag"] == "--enable-flashinfer-allreduce-fusion" and settings["fusion_backend"] == ""
    for bad in ("[Service]\nUser=x\n", "ExecStart=\n", "ExecStart=/x 'unclosed\n"):
        with pytest.raises(fp.ProofInputError):
            fp.exec_start_args(bad)
    with pytest.raises(fp.ProofInputError, match="whole number"):
        fp.unit_settings(["/x", "--tp-size", "two"])


def test_api_calls_are_counted_from_flashinfers_level_1_lines():
    lines = ["[2026-12-04 15:56:50] FlashInfer API Call: create_allreduce_fusion_workspace",
             "[2026-12-04 15:56:51] FlashInfer API Call: allreduce_fusion",
             "[2026-12-04 15:56:51] FlashInfer API Call: allreduce_fusion",
             "[2026-12-04 15:56:51] FlashInfer API Call: BatchPrefillWithPagedKVCacheWrapper.run",
             "unrelated allreduce_fusion"]
    assert fp.count_api_calls(lines) == {"create_allreduce_fusion_workspace": 1, "allreduce_fusion": 2,
                                         "BatchPrefillWithPagedKVCacheWrapper.run": 1}


# --------------------------------------------------------------------------------------------- whole logs
# (log file under tests/fixtures, the served model's architecture, the expected reason codes: [] = proven fused).
# The unit and /server_info are UNIT and SERVED (TP2, EAGLE3, backend trtllm). To add a captured log, put it under
# tests/fixtures (e.g. device/h200x1_shared2_fused.log) and add its line here; a log from a start with other
# arguments needs its own unit and served values in the case.
LOG_CASES = [
    ("fusion_proof/composed_0.5.17_tp2_fused.log", "Qwen3ForCausalLM", []),
    ("fusion_proof/composed_0.5.17_tp2_fused.log", "LlamaForCausalLM", ["architecture_unfused"]),
    ("fusion_proof/composed_0.5.17_tp2_preflight_skip.log", "Qwen3ForCausalLM", ["preflight_skipped"]),
    ("fusion_proof/composed_0.5.17_tp2_workspace_failed.log", "Qwen3ForCausalLM", ["workspace_failed"]),
    ("fusion_proof/composed_0.5.17_tp2_silent.log", "Qwen3ForCausalLM", ["not_set_up"]),
]


@pytest.mark.parametrize("log, architecture, expected", LOG_CASES,
                         ids=["%s-%s" % (os.path.basename(c[0]), c[1]) for c in LOG_CASES])
def test_whole_server_logs(log, architecture, expected):
    with open(os.path.join(FIXTURES, log), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    verdict = judge(lines, architecture=architecture)
    assert codes(verdict) == expected, verdict["msg"]
    assert verdict["passed"] == (expected == [])
