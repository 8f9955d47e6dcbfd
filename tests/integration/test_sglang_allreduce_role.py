"""The sglang_allreduce role on localhost, on a real sglang 0.5.23 + flashinfer-python 0.7.2 venv (--no-deps)."""
import getpass
import json

import pytest

from tests.helpers.ansible_run import failure, run_playbook, task_results

pytestmark = pytest.mark.wheels

PLAYBOOK = "tests/playbooks/sglang_allreduce_local.yml"
FUSION_FLAG = ["--flashinfer-allreduce-fusion-backend", "trtllm"]
OFF = ["--enforce-disable-flashinfer-allreduce-fusion"]  # 0.5.23's switch that keeps fusion off: on the nccl path


@pytest.fixture
def venv(pcie_ipc_venv):
    return pcie_ipc_venv


@pytest.fixture
def model(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"hidden_size": 4096}')
    return str(tmp_path / "model")


def run(venv, tmp_path, check=False, **variables):
    base = {"sglang_allreduce_venv": venv, "sglang_allreduce_tp_size": 2, "sglang_allreduce_user": getpass.getuser(),
            "sglang_allreduce_autotune_dir": str(tmp_path / "autotune"),
            "sglang_layout_env_dir": str(tmp_path / "etc"), "sglang_layout_home": str(tmp_path / "home"),
            "sglang_layout_state_dir": str(tmp_path / "home"),
            # the canaries have tests of their own (test_allreduce_*_canary.py); here the paths are decided alone
            "sglang_allreduce_canary": False}
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "home").mkdir(exist_ok=True)
    base.update(variables)
    return run_playbook(PLAYBOOK, base, check=check)


def published(report):
    facts = {}
    for name, result in task_results(report):
        if name in ("Publish every path's verdict and the candidates (the benchmark gate measures them)",
                    "Note the path's server arguments and environment"):
            facts.update(result["ansible_facts"])
    assert facts, "no published facts"
    return facts


def env_file(tmp_path):
    return (tmp_path / "etc" / "allreduce.env").read_text()


def write_choice(tmp_path, path, candidates):
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "allreduce-choice.json").write_text(json.dumps(
        {"version": 1, "path": path, "candidates": candidates, "at": "2026-12-01T06:00:00+00:00",
         "why": "%s is the fastest correct path (test)" % path, "paths": []}))


def test_auto_keeps_fusion_where_fusion_patch_gave_its_flag(venv, tmp_path, model):
    rc, report = run(venv, tmp_path, sglang_allreduce_fusion_args=FUSION_FLAG, sglang_allreduce_model_path=model,
                     sglang_allreduce_speculative=True, sglang_allreduce_speculative_num_draft_tokens=4,
                     sglang_allreduce_cuda_graph_max_bs=8)
    assert rc == 0, failure(report)
    facts = published(report)
    assert facts["sglang_allreduce_server_args"] == FUSION_FLAG
    assert facts["sglang_allreduce_candidates"] == ["fusion+pcie_ipc", "pcie_ipc", "fusion", "nccl"]
    both = facts["sglang_allreduce_result"]["paths"]["fusion+pcie_ipc"]["environment"]
    assert both["SGLANG_PCIE_IPC_MAX_NUMEL"] == str(8 * 4 * 4096)  # hidden size read from the model's config


def test_the_hidden_size_setting_sizes_pcie_ipc_when_the_model_is_not_here_yet(venv, tmp_path, model):
    shapes = dict(sglang_allreduce_fusion_args=FUSION_FLAG, sglang_allreduce_model_path=str(tmp_path / "not-copied"),
                  sglang_allreduce_speculative=True, sglang_allreduce_speculative_num_draft_tokens=4,
                  sglang_allreduce_cuda_graph_max_bs=8)
    rc, report = run(venv, tmp_path, sglang_allreduce_hidden_size=5120, **shapes)
    assert rc == 0, failure(report)
    both = published(report)["sglang_allreduce_result"]["paths"]["fusion+pcie_ipc"]["environment"]
    assert both["SGLANG_PCIE_IPC_MAX_NUMEL"] == str(8 * 4 * 5120)
    rc, report = run(venv, tmp_path, sglang_allreduce_hidden_size=7168, **dict(shapes, sglang_allreduce_model_path=model))
    assert rc == 0, failure(report)
    both = published(report)["sglang_allreduce_result"]["paths"]["fusion+pcie_ipc"]["environment"]
    assert both["SGLANG_PCIE_IPC_MAX_NUMEL"] == str(8 * 4 * 7168)  # the setting wins over the model's config


def test_auto_without_fusion_patch_is_nccl_and_says_why(venv, tmp_path):
    rc, report = run(venv, tmp_path, sglang_allreduce_fusion_args=[])
    assert rc == 0, failure(report)
    facts = published(report)
    assert facts["sglang_allreduce_server_args"] == OFF and "fusion" not in facts["sglang_allreduce_candidates"]
    assert any("fusion_patch gave this host no fusion flag" in r
               for r in facts["sglang_allreduce_result"]["refused"]["fusion"])


def test_an_explicit_path_that_cannot_run_fails_the_play_naming_the_reason(venv, tmp_path):
    rc, report = run(venv, tmp_path, sglang_allreduce_path="pcie_ipc", sglang_allreduce_tp_size=6)
    name, msg = failure(report)
    assert rc != 0 and name.startswith("Decide the all-reduce path") and "tp_size 6" in msg


def test_explicit_pcie_ipc_in_check_mode(venv, tmp_path):
    rc, report = run(venv, tmp_path, check=True, sglang_allreduce_path="pcie_ipc")
    assert rc == 0, failure(report)
    env = published(report)["sglang_allreduce_environment"]
    assert env["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "1" and env["FLASHINFER_AUTOTUNE_DIR"] == str(tmp_path / "autotune")


def test_a_bad_setting_is_refused_before_anything_runs(venv, tmp_path):
    rc, report = run(venv, tmp_path, sglang_allreduce_autotune_dir="relative/dir")
    name, msg = failure(report)
    assert rc != 0 and name == "Check the all-reduce path settings" and "autotune_dir" in msg


@pytest.mark.parametrize("ep", [["--ep-size", "2"], ["--ep-size=2"]])
def test_hybrid_ep_and_determinism_are_read_from_the_servers_extra_arguments(venv, tmp_path, ep):
    rc, report = run(venv, tmp_path, sglang_allreduce_tp_size=8, sglang_allreduce_fusion_args=FUSION_FLAG,
                     sglang_allreduce_server_settings={"extra_args": ep + ["--enable-deterministic-inference"]})
    assert rc == 0, failure(report)
    result = published(report)["sglang_allreduce_result"]
    assert result["path"] == "nccl" and result["candidates"] == ["nccl"]
    assert any("hybrid expert parallelism (ep_size 2 < tp_size 8" in r for r in result["refused"]["fusion"])
    assert any("deterministic" in r for r in result["refused"]["pcie_ipc"])


def test_the_chosen_paths_environment_file_is_written_once_and_dry_runs_leave_it(venv, tmp_path):
    rc, report = run(venv, tmp_path, check=True, sglang_allreduce_fusion_args=FUSION_FLAG)
    assert rc == 0, failure(report)
    assert not (tmp_path / "etc" / "allreduce.env").exists()
    rc, report = run(venv, tmp_path, sglang_allreduce_fusion_args=FUSION_FLAG)
    assert rc == 0, failure(report)
    assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=0\n" in env_file(tmp_path)  # fusion: the IPC switch written off
    rc, report = run(venv, tmp_path, sglang_allreduce_fusion_args=FUSION_FLAG)
    assert rc == 0 and not any(r.get("changed") for n, r in task_results(report)
                               if n == "Write the path's environment file")


def test_auto_renders_the_recorded_winner_while_the_candidates_are_the_same(venv, tmp_path):
    write_choice(tmp_path, "nccl", ["fusion+pcie_ipc", "pcie_ipc", "fusion", "nccl"])
    rc, report = run(venv, tmp_path, sglang_allreduce_fusion_args=FUSION_FLAG)
    assert rc == 0, failure(report)
    facts = published(report)
    assert facts["sglang_allreduce_applied"] == "nccl" and facts["sglang_allreduce_server_args"] == OFF
    assert facts["sglang_allreduce_result"]["measured"] is True
    assert "measured it fastest and correct" in facts["sglang_allreduce_result"]["why"]


def test_auto_falls_back_and_says_why_when_the_candidates_changed(venv, tmp_path):
    write_choice(tmp_path, "nccl", ["fusion", "nccl"])  # measured on another venv: no IPC paths then
    rc, report = run(venv, tmp_path, sglang_allreduce_fusion_args=FUSION_FLAG)
    assert rc == 0, failure(report)
    result = published(report)["sglang_allreduce_result"]
    assert result["path"] == "fusion" and result["measured"] is False
    assert "the candidates changed" in result["why"]


def test_the_pcie_ipc_environment_reaches_the_file(venv, tmp_path):
    rc, report = run(venv, tmp_path, sglang_allreduce_path="pcie_ipc")
    assert rc == 0, failure(report)
    text = env_file(tmp_path)
    assert "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1\n" in text and "FLASHINFER_AUTOTUNE_DIR=%s\n" % (tmp_path / "autotune") in text
