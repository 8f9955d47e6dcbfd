"""PCIe IPC held to its canary (sglang_allreduce runs the canaries its module says are due), on a real sglang
0.5.23 + flashinfer-python 0.7.2 venv (--no-deps). There is no GPU here: the canary command is the test's own
stand-in at that boundary. It records how it was called and answers as the canary's result file does (passed or
failed, with a summary), so what is tested is the role: when the canary runs, with which shape and environment,
what is recorded, and what the module then decides."""
import getpass
import json

import pytest

from tests.helpers import canary_standin
from tests.helpers.ansible_run import failure, run_playbook, task_results

pytestmark = pytest.mark.wheels

PLAYBOOK = "tests/playbooks/sglang_allreduce_local.yml"


@pytest.fixture
def venv(pcie_ipc_venv):
    return pcie_ipc_venv


@pytest.fixture
def canary(tmp_path):
    return canary_standin.make(tmp_path / "standin", "pcie_ipc")


def calls(canary):
    """The PCIe IPC canary's calls (fusion's is not due here: fusion_patch gave no fusion flag, unless a test says)."""
    return canary_standin.calls(canary, "pcie_ipc")


GPUS = {"driver_version": "580.65.06", "gpu_count": 2,
        "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"} for i in (0, 1)]}


def run(venv, tmp_path, canary, check=False, **variables):
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text('{"hidden_size": 4096}')
    for name in ("etc", "home"):
        (tmp_path / name).mkdir(exist_ok=True)
    base = {"sglang_allreduce_venv": venv, "sglang_allreduce_tp_size": 2, "sglang_allreduce_user": getpass.getuser(),
            "sglang_allreduce_autotune_dir": str(tmp_path / "autotune"),
            "sglang_allreduce_model_path": str(tmp_path / "model"), "sglang_allreduce_speculative": True,
            "sglang_allreduce_speculative_num_draft_tokens": 4, "sglang_allreduce_cuda_graph_max_bs": 8,
            "sglang_layout_env_dir": str(tmp_path / "etc"), "sglang_layout_home": str(tmp_path / "home"),
            "sglang_layout_state_dir": str(tmp_path / "home"),
            "sglang_allreduce_canary_command": [str(canary / "canary")],
            "sglang_allreduce_tools_dir": str(tmp_path / "tools"), "nvidia_gpu": GPUS,
            "sglang_allreduce_runtime_environment": {"RUNTIME_MARK": "the server's"}}
    base.update(variables)
    return run_playbook(PLAYBOOK, base, check=check)


def result_of(report):
    found = [r["ansible_facts"]["sglang_allreduce_result"] for name, r in task_results(report)
             if name == "Publish every path's verdict and the candidates (the benchmark gate measures them)"]
    assert found, "no published result"
    return found[-1]


def test_pcie_ipc_runs_after_its_canary_passed_once_for_this_server(venv, tmp_path, canary):
    rc, report = run(venv, tmp_path, canary)
    assert rc == 0, failure(report)
    (call,) = calls(canary)
    args = call["args"]
    assert args[:2] == ["--path", "pcie_ipc"] and args[args.index("--hidden") + 1] == "4096"
    # the workspace as the server's: SGLANG_PCIE_IPC_MAX_NUMEL = max batch 8 x 4 draft tokens x hidden 4096
    assert args[args.index("--pcie-ipc-max-numel") + 1] == str(8 * 4 * 4096)
    assert args[args.index("--max-batch") + 1] == "8" and args[args.index("--draft-tokens") + 1] == "4"
    # in the server's runtime environment plus the path's own: it tunes where the server will read the tactics
    assert call["env"]["FLASHINFER_AUTOTUNE_DIR"] == str(tmp_path / "autotune")
    assert call["env"]["RUNTIME_MARK"] == "the server's"
    assert call["env"]["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "home" / "flashinfer")
    result = result_of(report)
    assert result["canaries"]["pcie_ipc"]["state"] == "passed" and "pcie_ipc" in result["candidates"]
    record = json.loads((tmp_path / "home" / "pcie-ipc-canary.json").read_text())
    assert record["passed"] and record["key"] == result["canaries"]["pcie_ipc"]["key"]
    assert record["key"]["world_size"] == 2 and record["key"]["hidden"] == 4096
    # recorded for the canary script that ran (the canary and its timer, as installed beside each other)
    assert record["key"]["canary"] == canary_standin.version()
    assert (tmp_path / "tools" / "allreduce_canary.py").exists() and (tmp_path / "tools" / "cuda_graph_timer.py").exists()
    # the next deploy: the record stands, nothing runs
    rc, report = run(venv, tmp_path, canary)
    assert rc == 0 and len(calls(canary)) == 1 and "pcie_ipc" in result_of(report)["candidates"]
    # another sizing is another server: proven again
    rc, report = run(venv, tmp_path, canary, sglang_allreduce_cuda_graph_max_bs=16)
    assert rc == 0 and len(calls(canary)) == 2
    assert calls(canary)[-1]["args"][calls(canary)[-1]["args"].index("--max-batch") + 1] == "16"


def test_a_new_driver_proves_pcie_ipc_again(venv, tmp_path, canary):
    gpus = GPUS
    (canary / "VERDICT").write_text("fail")
    rc, report = run(venv, tmp_path, canary, nvidia_gpu=gpus)
    assert rc == 0, failure(report)
    record = json.loads((tmp_path / "home" / "pcie-ipc-canary.json").read_text())
    assert not record["passed"] and record["key"]["gpu"] == {"gpus": [gpus["gpus"][0]["name"]] * 2,
                                                             "driver": "580.65.06"}
    assert run(venv, tmp_path, canary, nvidia_gpu=gpus)[0] == 0 and len(calls(canary)) == 1  # remembered
    (canary / "VERDICT").write_text("pass")
    rc, report = run(venv, tmp_path, canary, nvidia_gpu=dict(gpus, driver_version="590.10.01"))
    assert rc == 0, failure(report)
    assert len(calls(canary)) == 2 and "pcie_ipc" in result_of(report)["candidates"]


def test_a_failed_canary_keeps_both_ipc_paths_off_and_refuses_them_explicitly(venv, tmp_path, canary):
    (canary / "VERDICT").write_text("fail")
    (canary / "VERDICT.fusion").write_text("pass")  # the fused kernel, due beside it here, passes
    rc, report = run(venv, tmp_path, canary,
                     sglang_allreduce_fusion_args=["--flashinfer-allreduce-fusion-backend", "trtllm"])
    assert rc == 0, failure(report)
    result = result_of(report)
    assert result["candidates"] == ["fusion", "nccl"] and result["canaries"]["pcie_ipc"]["state"] == "failed"
    assert "tokens 12: 3 NaN/Inf element(s) on rank 1" in result["refused"]["pcie_ipc"][-1]
    assert "tokens 12" in result["refused"]["fusion+pcie_ipc"][-1]
    rc, report = run(venv, tmp_path, canary, sglang_allreduce_path="pcie_ipc")
    name, msg = failure(report)
    assert rc != 0 and name.startswith("Decide the all-reduce path") and "unproven here" in msg
    assert len(calls(canary)) == 1  # remembered: it does not run again until its record is removed


def test_check_mode_runs_no_canary_and_says_it_is_due(venv, tmp_path, canary):
    rc, report = run(venv, tmp_path, canary, check=True)
    assert rc == 0, failure(report)
    assert calls(canary) == [] and not (tmp_path / "home" / "pcie-ipc-canary.json").exists()
    result = result_of(report)
    assert result["canaries"]["pcie_ipc"]["state"] == "due" and "pcie_ipc" in result["candidates"]


def test_without_the_hidden_size_no_canary_can_run_and_pcie_ipc_stays_off(venv, tmp_path, canary):
    (tmp_path / "empty-model").mkdir()
    rc, report = run(venv, tmp_path, canary, sglang_allreduce_model_path=str(tmp_path / "empty-model"))
    assert rc == 0, failure(report)
    result = result_of(report)
    assert calls(canary) == [] and "pcie_ipc" not in result["candidates"]
    assert "needs the model's hidden size" in " ".join(result["refused"]["pcie_ipc"])
