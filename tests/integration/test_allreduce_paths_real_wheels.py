"""sglang_allreduce_paths, through real Ansible, on real sglang + flashinfer-python wheels (pip --no-deps).

Every refusal is checked against the installed packages and must name its reason; the runnable paths must
carry the flags and environment the installed release reads.
"""
import getpass
import os

import pytest

from tests.helpers import wheels
from tests.helpers.ansible_run import run_module

pytestmark = pytest.mark.wheels

AUTOTUNE = "/var/lib/sglang/flashinfer/autotune"
OFF = ["--enforce-disable-flashinfer-allreduce-fusion"]  # SGLang's own off switch (0.5.14+): the paths without fusion
SPEC = dict(speculative=True, speculative_num_draft_tokens=4, cuda_graph_max_bs=16, hidden_size=7168)


# The module only reads the venvs: the run's shared pristine ones (tests/integration/conftest.py).
def venv_with(pristine_venv_of, sglang, flashinfer):
    return pristine_venv_of(("sglang", sglang), ("flashinfer-python", flashinfer))


@pytest.fixture(scope="module")
def v0523(pristine_venv_of):
    """What sglang 0.5.23 pins: FlashInfer 0.7.2."""
    return venv_with(pristine_venv_of, "0.5.23", "0.7.2")


@pytest.fixture(scope="module")
def v0521(pristine_venv_of):
    """What sglang 0.5.21 pins: FlashInfer 0.6.18 (the switch exists, the kernel does not)."""
    return venv_with(pristine_venv_of, "0.5.21", "0.6.18")


@pytest.fixture(scope="module")
def v0517(pristine_venv_of):
    """The device machine's install: sglang 0.5.17 with FlashInfer upgraded to 0.6.18."""
    return venv_with(pristine_venv_of, "0.5.17", "0.6.18")


@pytest.fixture(scope="module")
def v0514(pristine_venv_of):
    """sglang 0.5.14 with the FlashInfer it pins (0.6.12, before SM12x trtllm kernels)."""
    return venv_with(pristine_venv_of, "0.5.14", "0.6.12")


def paths(target_venv, **args):
    base = dict(venv=target_venv, tp_size=2, autotune_dir=AUTOTUNE)
    base.update(args)
    return run_module("sglang_allreduce_paths", base)


def refused(venv, path, *needles, **args):
    result = paths(venv, path=path, **args)
    assert result.get("failed") and result["changed"] is False, result
    for needle in needles:
        assert needle in result["msg"], (needle, result["msg"])
    assert path in result["refused"]
    return result


def test_0523_runs_every_path_with_its_flags_and_environment(v0523):
    result = paths(v0523, **SPEC)
    assert not result.get("failed") and result["changed"] is False, result.get("msg")
    assert result["facts"]["sglang_version"] == "0.5.23" and result["facts"]["flashinfer_version"] == "0.7.2"
    assert result["candidates"] == ["fusion+pcie_ipc", "pcie_ipc", "fusion", "nccl"]
    assert result["path"] == "fusion" and result["requested"] == "auto"
    assert result["server_args"] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    assert result["environment"] == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}
    both = result["paths"]["fusion+pcie_ipc"]
    assert both["server_args"] == ["--flashinfer-allreduce-fusion-backend", "trtllm", "--disable-custom-all-reduce"]
    assert both["environment"] == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "FLASHINFER_AUTOTUNE_DIR": AUTOTUNE,
                                   "SGLANG_PCIE_IPC_MAX_NUMEL": str(16 * 4 * 7168)}
    assert result["facts"]["no_fusion_flag"] == OFF
    assert result["paths"]["nccl"]["server_args"] == OFF
    assert result["paths"]["pcie_ipc"]["server_args"] == OFF + ["--disable-custom-all-reduce"]
    assert result["paths"]["fusion"]["server_args"] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_0523_pcie_ipc_explicitly(v0523, tp):
    result = paths(v0523, path="pcie_ipc", tp_size=tp, hidden_size=7168)
    assert not result.get("failed"), result["msg"]
    assert result["path"] == "pcie_ipc" and result["environment"]["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] == "1"
    # no CUDA-graph max batch given: SGLang sizes the workspace from its own decode config
    assert "SGLANG_PCIE_IPC_MAX_NUMEL" not in result["environment"]
    assert any("cuda_graph_max_bs" in note for note in result["notes"])


def test_0523_pcie_ipc_without_custom_allreduce_override(v0523):
    result = paths(v0523, path="pcie_ipc", pcie_ipc_exclusive=False)
    assert result["server_args"] == OFF
    assert any("dispatched first" in note for note in result["notes"])


def test_0523_refuses_pcie_ipc_at_tp6(v0523):
    refused(v0523, "pcie_ipc", "tp_size 6", "world sizes [2, 4, 8]", tp_size=6)


def test_0523_refuses_fusion_at_tp6(v0523):
    refused(v0523, "fusion", "tp_size 6", "_use_oneshot_heuristics", tp_size=6)


def test_0523_refuses_fusion_with_hybrid_ep(v0523):
    result = refused(v0523, "fusion", "hybrid expert parallelism", "#32012", tp_size=8, ep_size=2)
    assert "fusion+pcie_ipc" in result["refused"] and "pcie_ipc" in result["candidates"]


@pytest.mark.parametrize("ep", [1, 8])
def test_0523_pure_tp_or_pure_ep_keeps_fusion(v0523, ep):
    result = paths(v0523, path="fusion", tp_size=8, ep_size=ep)
    assert not result.get("failed"), result["msg"]


def test_0523_refuses_both_across_nodes(v0523):
    result = paths(v0523, tp_size=16, nnodes=2)
    assert result["candidates"] == ["nccl"] and result["path"] == "nccl"
    assert any("single-node only" in r for r in result["refused"]["fusion"])
    assert any("cannot cross hosts" in r for r in result["refused"]["pcie_ipc"])


def test_0523_refuses_pcie_ipc_under_deterministic_inference(v0523):
    refused(v0523, "pcie_ipc", "deterministic inference", deterministic=True)


def test_0523_refuses_pcie_ipc_without_a_persistent_autotune_dir(v0523):
    refused(v0523, "pcie_ipc", "FLASHINFER_AUTOTUNE_DIR", "re-tune", autotune_dir=None)


def test_0523_refuses_an_autotune_dir_the_service_user_cannot_write(v0523, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o755)
    user = "nobody"
    refused(v0523, "pcie_ipc", "not writable by nobody", autotune_dir=str(locked / "autotune"), service_user=user)
    assert not paths(v0523, path="pcie_ipc", autotune_dir=str(locked / "autotune"),
                     service_user=getpass.getuser()).get("failed")


def test_0523_refuses_both_with_expandable_segments(v0523):
    result = paths(v0523, environment={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert result["candidates"] == ["nccl"]
    assert all(any("expandable" in r for r in result["refused"][p]) for p in ("fusion", "pcie_ipc"))


def test_0521_has_the_switch_but_flashinfer_0618_has_no_pcie_kernel(v0521):
    result = refused(v0521, "pcie_ipc", "flashinfer-python 0.6.18 is older than 0.7.0")
    assert result["facts"]["sglang_pcie_ipc_switch"] is True and result["facts"]["flashinfer_pcie_ipc"] is False
    assert paths(v0521)["candidates"] == ["fusion", "nccl"]


def test_0517_device_install_has_neither_switch_nor_kernel(v0517):
    result = refused(v0517, "fusion+pcie_ipc", "no SGLANG_ENABLE_PCIE_IPC_ALLREDUCE switch", "older than 0.7.0")
    assert result["facts"]["sglang_version"] == "0.5.17"
    auto = paths(v0517, **SPEC)
    assert auto["candidates"] == ["fusion", "nccl"] and auto["environment"] == {}
    assert auto["paths"]["nccl"]["server_args"] == OFF


def test_0514_with_its_pinned_flashinfer_refuses_fusion(v0514):
    result = refused(v0514, "fusion", "flashinfer-python 0.6.12 is older than 0.6.17", "PR #3903")
    auto = paths(v0514)
    assert auto["path"] == "nccl" and auto["candidates"] == ["nccl"] and "fusion cannot run" in auto["why"]
    assert auto["server_args"] == OFF  # the first release with the off switch
    assert result["facts"]["trtllm_oneshot_world_sizes"] == [2, 4, 8]


def test_check_mode_and_hidden_size_from_the_model_config(v0523, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"text_config": {"hidden_size": 7168}}')
    result = run_module("sglang_allreduce_paths", dict(venv=v0523, path="pcie_ipc", tp_size=8, model_path=str(model),
                                                       cuda_graph_max_bs=8, autotune_dir=AUTOTUNE), check=True)
    assert not result.get("failed") and result["changed"] is False, result.get("msg")
    assert result["environment"]["SGLANG_PCIE_IPC_MAX_NUMEL"] == str(8 * 7168)


@pytest.mark.parametrize("args,needle", [
    (dict(tp_size=0), "tp_size must be an integer >= 1"),
    (dict(tp_size=8, ep_size=3), "ep_size 3 does not divide tp_size 8"),
    (dict(autotune_dir="/var/lib/sglang/a b"), "autotune_dir must be an absolute path"),
    (dict(path="nvlink"), "value of path must be one of"),
    (dict(tp_size="eight"), "tp_size"),
])
def test_bad_input_gets_a_message_not_a_traceback(v0523, args, needle):
    result = paths(v0523, **args)
    assert result.get("failed") and needle in result["msg"], result.get("msg")
    assert "Traceback" not in result["msg"] and "Traceback" not in result.get("exception", "")


def test_a_venv_not_installed_yet_is_reported_not_read(v0523):
    # A dry run before the install: the role decides what that means (check mode goes on, a real run stops).
    result = paths(v0523, venv="/nonexistent/venv")
    assert not result.get("failed") and result["venv_exists"] is False and "does not exist" in result["msg"]
    assert "candidates" not in result
    assert paths(v0523)["venv_exists"] is True


def test_a_model_not_copied_yet_leaves_the_hidden_size_unknown(v0523, tmp_path):
    known = paths(v0523, path="pcie_ipc", tp_size=8, cuda_graph_max_bs=8, hidden_size=7168)
    missing = paths(v0523, path="pcie_ipc", tp_size=8, cuda_graph_max_bs=8, model_path=str(tmp_path / "absent"))
    assert known["environment"]["SGLANG_PCIE_IPC_MAX_NUMEL"] == str(8 * 7168)
    assert not missing.get("failed") and "SGLANG_PCIE_IPC_MAX_NUMEL" not in missing.get("environment", {}), missing
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text('{"hidden_size": "wide"}')
    broken = paths(v0523, model_path=str(tmp_path / "broken"))
    assert broken.get("failed") and "has no positive integer hidden_size" in broken["msg"], broken


def test_a_venv_without_sglang(tmp_path):
    venv = wheels.make_venv(str(tmp_path / "empty"))
    result = paths(venv)
    assert result.get("failed") and "sglang is not installed" in result["msg"]
    assert os.path.isdir(venv)
