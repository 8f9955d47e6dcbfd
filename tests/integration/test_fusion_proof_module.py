"""The sglang_fusion_proof module through real Ansible: the unit, the model and the release read on the host.

The release is the small one of tests/unit/test_fused_architectures.py in a venv's site-packages, found from the
unit's ExecStart interpreter as on a host.
"""
import json
import os

import pytest

from tests.helpers.ansible_run import run_module
from tests.unit.test_fused_architectures import RELEASE
from tests.unit.test_fusion_proof import FUSED_LOG, SKIPPED_LOG

SERVED = {"tp_size": 2, "model_path": None, "speculative_algorithm": "EAGLE3",
          "flashinfer_allreduce_fusion_backend": "trtllm"}


@pytest.fixture
def host(tmp_path):
    """A venv holding the release, a model, a unit starting it with fusion at TP2."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for path, text in RELEASE.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    (site / "sglang-0.5.17.dist-info").mkdir()
    (site / "sglang-0.5.17.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.17\n")
    models = {}
    for name, architecture in (("kimi", "KimiK25ForConditionalGeneration"), ("llama", "LlamaForCausalLM")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"architectures": [architecture]}))
        models[name] = str(tmp_path / name)

    def unit(model="kimi", extra=""):
        path = tmp_path / ("%s.service" % model)
        path.write_text("[Service]\nExecStart=%s/venv/bin/python -m sglang.launch_server --model-path %s "
                        "--tp-size 2 --speculative-algorithm EAGLE3 --flashinfer-allreduce-fusion-backend trtllm%s\n"
                        % (tmp_path, models[model], extra))
        return str(path)

    def prove(model="kimi", lines=FUSED_LOG, check=False, **args):
        params = {"unit_file": unit(model), "log_lines": lines, "served": dict(SERVED, model_path=models[model]),
                  "service": "sglang on lab-gpu1"}
        params.update(args)
        return run_module("sglang_fusion_proof", params, check=check)

    prove.tmp = tmp_path
    prove.unit = unit
    prove.models = models
    return prove


def test_a_fused_start_passes_with_the_route_it_found(host):
    result = host()
    assert not result.get("failed") and not result["changed"] and result["passed"], result
    assert result["architecture"] == "KimiK25ForConditionalGeneration" and result["sglang_version"] == "0.5.17"
    assert result["route"][:2] == ["sglang.srt.models.kimi_k25:KimiK25ForConditionalGeneration",
                                   "sglang.srt.models.deepseek_v2:DeepseekV3ForCausalLM"]
    assert result["msg"].startswith("sglang on lab-gpu1: serves what its unit starts")
    assert host(check=True)["passed"]  # reads only: the same in check mode


def test_a_preflight_skip_fails_with_its_reason(host):
    result = host(lines=SKIPPED_LOG)
    assert result.get("failed") and [r["code"] for r in result["reasons"]] == ["preflight_skipped"]
    assert "<CUresult.CUDA_ERROR_NOT_SUPPORTED: 801>" in result["msg"] and "Traceback" not in result["msg"]


def test_a_model_whose_layers_never_call_the_kernel_fails(host):
    result = host(model="llama")
    assert result.get("failed") and [r["code"] for r in result["reasons"]] == ["architecture_unfused"]
    assert "LlamaForCausalLM never calls the fused kernel in sglang 0.5.17" in result["msg"]


def test_a_release_that_cannot_be_found_is_not_taken_for_fused(host):
    result = host(site_packages=str(host.tmp / "elsewhere"))
    assert result.get("failed") and [r["code"] for r in result["reasons"]] == ["architecture_unknown"]
    assert "no sglang/ package in %s" % (host.tmp / "elsewhere") in result["msg"]
    os.remove(os.path.join(host.models["kimi"], "config.json"))
    result = host()
    assert [r["code"] for r in result["reasons"]] == ["architecture_unknown"] and "config.json" in result["msg"]


def test_the_api_log_counts_this_starts_calls_only(host):
    folder = host.tmp / "fi"
    folder.mkdir()
    (folder / "fi-100.log").write_text("[t] FlashInfer API Call: create_allreduce_fusion_workspace\n"
                                       "[t] FlashInfer API Call: allreduce_fusion\n" * 3)
    (folder / "fi-99.log").write_text("[t] FlashInfer API Call: allreduce_fusion\n")
    os.utime(folder / "fi-99.log", (1, 1))  # written before the server (this test's process) started
    result = host(api_log=str(folder / "fi-%i.log"), server_pid=os.getpid())
    assert result["passed"] and result["evidence"]["api_calls"] == {
        "files": 1, "allreduce_fusion": 3, "create_allreduce_fusion_workspace": 3}, result
    assert host(api_log=str(folder / "fi-%i.log"))["evidence"]["api_calls"]["files"] == 2  # no pid: every file
    (folder / "fi-100.log").write_text("[t] FlashInfer API Call: create_allreduce_fusion_workspace\n")
    result = host(api_log=str(folder / "fi-%i.log"), server_pid=os.getpid())
    assert result.get("failed") and [r["code"] for r in result["reasons"]] == ["api_log_no_calls"]
    result = host(api_log=str(host.tmp / "none" / "fi-%i.log"))
    assert [r["code"] for r in result["reasons"]] == ["api_log_missing"]


@pytest.mark.parametrize("change, message", [
    ({"served": {"tp_size": 2, "api_key": "secret"}}, "served takes only tp_size"),
    ({"unit_file": "/nonexistent/sglang.service"}, "cannot read the unit /nonexistent/sglang.service"),
    ({"log_lines": "not a list"}, None),
])
def test_bad_input_gets_its_own_message(host, change, message):
    result = host(**change)
    assert result.get("failed") and "Traceback" not in result["msg"] and "module_stderr" not in result, result
    if message:
        assert message in result["msg"]
    assert "secret" not in result["msg"]


def test_a_unit_without_exec_start_is_refused_by_name(host):
    path = host.tmp / "empty.service"
    path.write_text("[Service]\nUser=sglang\n")
    result = host(unit_file=str(path))
    assert result.get("failed") and "empty.service: the unit has no ExecStart= line" in result["msg"]


def test_fusion_is_not_judged_without_a_fusion_flag(host):
    path = host.tmp / "plain.service"
    path.write_text("[Service]\nExecStart=/nowhere/bin/python -m sglang.launch_server --model-path %s --tp-size 2 "
                    "--speculative-algorithm EAGLE3 --enforce-disable-flashinfer-allreduce-fusion\n"
                    % host.models["llama"])
    result = host(unit_file=str(path), lines=SKIPPED_LOG,
                  served=dict(SERVED, model_path=host.models["llama"], flashinfer_allreduce_fusion_backend=None))
    assert result["passed"] and not result["fusion_expected"] and "architecture" not in result
