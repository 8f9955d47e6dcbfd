"""sglang_server's `prove` entry point end to end on the lab's SGLang stand-in: the server's log file (no journal
here), /server_info, the unit's ExecStart and the release in its venv, as scripts/device/sglang_e2e.yml runs it on a
GPU machine. The stand-in prints SGLang's own fusion lines, so the proof passes a fused start and fails the others by
name, as it does on a real server; the API key never reaches the report.
"""
import json
import os

import pytest

from tests.helpers.ansible_run import failure, run_playbook
from tests.unit.test_fused_architectures import RELEASE
from tests.helpers.sglang_standin import FUSION, Standin

PLAYBOOK = "tests/playbooks/sglang_prove.yml"
KEY = "sk-prove-Zq81xKdfe0"


@pytest.fixture
def prove(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for path, text in RELEASE.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    units = tmp_path / "units"
    units.mkdir()
    servers = []

    def run(architecture="KimiK25ForConditionalGeneration", config=None, key=False, extra=None):
        model = tmp_path / architecture
        model.mkdir(exist_ok=True)
        (model / "config.json").write_text(json.dumps({"architectures": [architecture], "hidden_size": 2048}))
        args = ["--tp-size", "2"] + FUSION + (["--api-key", KEY] if key else [])
        server = Standin(tmp_path, config, args, model=str(model)).start()
        servers.append(server)
        server.wait_ready()
        # the unit as the role renders it (the key goes through --config there, never the arguments)
        (units / "sglang-prove-test.service").write_text(
            "[Service]\nExecStart=%s/venv/bin/python -m sglang.launch_server --model-path %s --tp-size 2 %s\n"
            % (tmp_path, model, " ".join(FUSION)))
        variables = {"sglang_layout_unit_dir": str(units), "sglang_server_service": "sglang-prove-test",
                     "sglang_server_port": server.port, "sglang_server_log_file": server.out_path}
        if key:
            (tmp_path / "key").write_text(KEY + "\n")
            os.chmod(str(tmp_path / "key"), 0o600)
            variables["sglang_server_api_key_file"] = str(tmp_path / "key")
        variables.update(extra or {})
        return run_playbook(PLAYBOOK, variables)

    yield run
    for server in servers:
        server.stop()


def test_a_fused_start_is_proven_and_the_key_stays_out_of_the_report(prove):
    rc, report = prove(key=True)
    assert rc == 0, failure(report)
    printed = json.dumps(report)
    assert KEY not in printed and "fused path set up (backend=trtllm on TP0, TP1)" in printed


@pytest.mark.parametrize("variant, expected", [
    ("skipped", 'preflight vote skipped fusion: "FlashInfer workspace preflight probe failed (cuMulticastGetGranularity '
                'failed for FlashInfer workspace preflight: <CUresult.CUDA_ERROR_NOT_SUPPORTED: 801>)" on TP0, TP1'),
    ("disabled", "FlashInfer's fusion workspace could not be created"),
    ("none", "the release never set the fused path up"),
])
def test_each_way_unfused_fails_by_name(prove, variant, expected):
    rc, report = prove(config={"fusion_log": variant})
    task, msg = failure(report)
    assert rc != 0 and task == "Check the fusion path and the served arguments" and expected in msg, msg
    assert msg.startswith("sglang-prove-test on localhost: serves, but not what its unit starts")


def test_a_model_whose_layers_never_call_the_kernel_fails_though_the_log_says_enabled(prove):
    rc, report = prove(architecture="LlamaForCausalLM")
    task, msg = failure(report)
    assert rc != 0 and "LlamaForCausalLM never calls the fused kernel" in msg, msg
    assert "architecture_unfused" in json.dumps(report) and "preflight" not in msg  # the log itself says enabled


def test_the_api_log_when_named_must_count_a_call(prove, tmp_path):
    rc, report = prove(extra={"sglang_server_fusion_api_log": str(tmp_path / "fi" / "fi-%i.log")})
    task, msg = failure(report)
    assert rc != 0 and "no FlashInfer API log of this start at %s" % (tmp_path / "fi" / "fi-*.log") in msg, msg


def test_an_unreadable_log_file_is_named(prove, tmp_path):
    rc, report = prove(extra={"sglang_server_log_file": str(tmp_path / "missing.log")})
    task, msg = failure(report)
    assert rc != 0 and task == "Require the log" and "cannot read the server's log file" in msg, msg
