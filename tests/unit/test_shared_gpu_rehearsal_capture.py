"""Real start-ups of the shared-GPU rehearsal (tests/fixtures/device/h100x1_shared2_deepseek_v3_capture, whose README
says what they are and are not): what SGLang 0.5.17 did with the units the roles rendered at TP2 for the DeepseekV3
family, and the role's fusion proof on those very logs."""
import json
import os

import pytest
from ansible.module_utils import fusion_proof as fp

from tests.helpers.ansible_run import REPO

CAPTURE = os.path.join(REPO, "tests", "fixtures", "device", "h100x1_shared2_deepseek_v3_capture")
with open(os.path.join(CAPTURE, "capture.json"), encoding="utf-8") as handle:
    DOC = json.load(handle)
OFF = "--enforce-disable-flashinfer-allreduce-fusion"


def log(name):
    with open(os.path.join(CAPTURE, "server-%s.log" % name), encoding="utf-8") as handle:
        return handle.read().splitlines()


def args(name):
    return DOC["legs"][name]["argv"]


def served_as_asked(name):
    """What /server_info would say for a server that serves its unit (the fields the proof compares)."""
    unit = fp.unit_settings(args(name))
    return {"tp_size": 2, "model_path": unit["model_path"], "speculative_algorithm": unit["speculative_algorithm"],
            "flashinfer_allreduce_fusion_backend": unit["fusion_backend"]}


def calls(name):
    return (DOC["legs"][name]["flashinfer_api_calls"] or {}).get("allreduce_fusion", 0)


def judge(name):
    counts = DOC["legs"][name]["flashinfer_api_calls"]
    return fp.judge(log(name), args(name), served_as_asked(name), architecture="DeepseekV3ForCausalLM",
                    fused_architectures=["DeepseekV3ForCausalLM"],
                    api_calls={"files": 2, "calls": counts, "where": "capture.json"})


def test_the_units_were_rendered_at_tp2_and_the_rank_sharing_stayed_out_of_them():
    for name, leg in DOC["legs"].items():
        assert leg["argv"][leg["argv"].index("--tp-size") + 1] == "2", name
        assert leg["appended_args"] == ["--disable-custom-all-reduce"], name
        assert "--disable-custom-all-reduce" not in leg["argv"], name
        assert {"SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS", "CUDA_VISIBLE_DEVICES", "PYTHONPATH"} <= set(
            leg["added_environment"]), name


def test_the_patch_admitted_every_gate_and_its_canary_passed_on_the_shared_gpu():
    assert [(s["gate"], s["status"]) for s in DOC["patch_sites_at_first_setup"]] == [
        ("G1", "patched"), ("G2", "patched"), ("G3", "patched")]
    assert DOC["fusion_canary"]["passed"] is True
    assert DOC["fusion_server_args"] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    assert DOC["no_fusion_server_args"] == [OFF]


def test_patched_both_ranks_set_the_fused_path_up_and_called_the_kernel():
    lines = log("spec_fusion")
    enabled = [l for l in lines if "FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm" in l]
    assert {l.split(" TP")[1][0] for l in enabled} == {"0", "1"}
    assert "world_size=2" in enabled[0]
    assert not [l for l in lines if "Skipping allreduce fusion" in l]
    assert calls("spec_fusion") > 0


def test_the_control_skips_fusion_at_the_preflight_and_never_calls_the_kernel():
    assert args("control") == args("spec_fusion")  # the same unit, only the patch reverted
    assert DOC["control_revert_msg"].startswith("restored")
    lines = log("control")
    for rank in ("TP0", "TP1"):
        assert any(rank in l and "FlashInfer workspace preflight probe failed (cuMulticastGetGranularity failed"
                   in l and "Skipping allreduce fusion" in l for l in lines), rank
    assert not [l for l in lines if "FlashInfer AllReduce Fusion enabled" in l]
    assert calls("control") == 0


@pytest.mark.parametrize("name", ["spec_nofusion", "plain"])
def test_without_fusion_the_off_switch_beats_sglangs_auto_enable_for_deepseek_v3(name):
    assert OFF in args(name) and "--flashinfer-allreduce-fusion-backend" not in args(name)
    lines = log(name)
    assert any("Auto-enabling FlashInfer AllReduce Fusion on SM90/SM10X for DeepseekV3ForCausalLM" in l for l in lines)
    assert any("FlashInfer allreduce fusion is forcibly disabled" in l for l in lines)
    assert any("enforce_disable_flashinfer_allreduce_fusion=True" in l for l in lines)
    assert calls(name) == 0


def test_the_roles_proof_passes_the_fused_start_and_names_the_controls_skip():
    assert judge("spec_fusion")["passed"], judge("spec_fusion")["msg"]
    control = judge("control")
    assert not control["passed"]
    assert [r["code"] for r in control["reasons"]][:1] == ["preflight_skipped"]
    assert "CUDA_ERROR_NOT_SUPPORTED" in control["msg"]
    for name in ("spec_nofusion", "plain"):  # no fusion asked: nothing to prove about it
        assert judge(name)["passed"] and not judge(name)["fusion_expected"], name


def test_sglangs_mla_draft_class_loads_the_kimi_layout_draft():
    lines = log("spec_fusion_mla_draft")
    assert any("Load weight end" in l and "type=Eagle3DeepseekV2ForCausalLM" in l for l in lines)
    assert DOC["legs"]["spec_fusion_mla_draft"]["ready"]["ready"] is False
    assert "--speculative-draft-model-path" in args("spec_fusion_mla_draft")
