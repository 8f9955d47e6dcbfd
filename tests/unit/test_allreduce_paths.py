"""allreduce_paths' pure parts: source markers from text, sizing, validation, writability (real wheels: integration)."""
import getpass
import json
import os

import pytest

from ansible.module_utils import allreduce_paths as ap

ENVIRON = ("class Envs:\n    SGLANG_ENABLE_PCIE_IPC_ALLREDUCE = EnvBool(False)\n"
           "    SGLANG_PCIE_IPC_MAX_NUMEL = EnvInt(0)\n")
DISPATCH = ("class G:\n    def _resolve_outplace_all_reduce_method(self, x):\n        if a:\n            return 'ca'\n"
            "        if b:\n            return 'pcie_ipc'\n        return None\n")


def facts(**over):
    files = {ap.SG_ENVIRON: ENVIRON, ap.SG_PCIE: "_SUPPORTED_WORLD_SIZES = (2, 4, 8)\n# deterministic\n",
             ap.SG_PARALLEL: DISPATCH, ap.SG_SERVER_ARGS: "x = '--flashinfer-allreduce-fusion-backend'\n"
                                                           "y = '--disable-custom-all-reduce'\n",
             ap.SG_FUSION: "raise ValueError('FlashInfer allreduce fusion trtllm backend supports single-node only.')",
             ap.FI_COMM_INIT: "from .pcie_ipc_ar import PcieIpcAllReduceWorkspace\n",
             ap.FI_PCIE: "_SUPPORTED_WORLD_SIZES = (2, 4, 8)\nclass PcieIpcAllReduceWorkspace:\n    pass\n",
             ap.FI_TRTLLM: "_use_oneshot_heuristics: dict[int, int] = {2: 512, 4: 64, 8: 42}\n"}
    found = ap.source_facts(files, {"sglang": ["0.5.23"], "flashinfer-python": ["0.7.2"]})
    found.update(over)
    return found


def test_markers_read_from_source_text():
    found = facts()
    assert found["fusion_flag"] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    assert found["sglang_pcie_ipc_switch"] and found["sglang_pcie_ipc_max_numel"] and found["flashinfer_pcie_ipc"]
    assert found["custom_allreduce_before_pcie_ipc"] and found["disable_custom_all_reduce_flag"]
    assert found["trtllm_oneshot_world_sizes"] == [2, 4, 8] and found["fusion_single_node_only"]
    bare = ap.source_facts({}, {"sglang": ["0.5.17"]})
    assert not bare["sglang_pcie_ipc_switch"] and bare["flashinfer_version"] is None and bare["fusion_flag"] == []


@pytest.mark.parametrize("setup,expected", [
    (dict(cuda_graph_max_bs=16, speculative=True, speculative_num_draft_tokens=4, hidden_size=7168), 458752),
    (dict(cuda_graph_max_bs=16, speculative=False, hidden_size=7168), 16 * 7168),
    (dict(cuda_graph_max_bs=16, speculative=True, hidden_size=7168), None),  # draft tokens unknown
    (dict(speculative=False, hidden_size=7168), None),                       # max batch unknown
    (dict(cuda_graph_max_bs=3, speculative=False, hidden_size=4099), None),  # not whole 16-byte packs
])
def test_max_numel_only_when_every_factor_is_known(setup, expected):
    value, why = ap.max_numel(facts(), setup)
    assert value == expected and why
    assert ap.max_numel(facts(sglang_pcie_ipc_max_numel=False), setup)[0] is None


def test_explicit_refusal_carries_every_reason():
    with pytest.raises(ap.PathsError) as caught:
        ap.decide("fusion+pcie_ipc", facts(flashinfer_version="0.6.12"), dict(tp_size=8, ep_size=2))
    msg = caught.value.msg
    assert "older than 0.6.17" in msg and "older than 0.7.0" in msg and "hybrid expert" in msg and "AUTOTUNE" in msg
    assert caught.value.result["candidates"] == ["nccl"]


def test_the_paths_without_fusion_pass_the_off_switch_where_the_release_has_one():
    off = "--enforce-disable-flashinfer-allreduce-fusion"
    declared = "class Exec:\n    enforce_disable_flashinfer_allreduce_fusion: A[bool, 'Off.'] = False\n"
    found = ap.source_facts({ap.SG_FIELDS_DIR + "/exec_.py": declared}, {"sglang": ["0.5.23"]})
    assert found["no_fusion_flag"] == [off]
    result = ap.decide("auto", facts(no_fusion_flag=[off]), dict(tp_size=2, autotune_dir="/x"))
    args = dict((path, spec["server_args"]) for path, spec in result["paths"].items())
    assert args == {"nccl": [off], "pcie_ipc": [off, "--disable-custom-all-reduce"],
                    "fusion": ["--flashinfer-allreduce-fusion-backend", "trtllm"],
                    "fusion+pcie_ipc": ["--flashinfer-allreduce-fusion-backend", "trtllm", "--disable-custom-all-reduce"]}
    assert any(note.startswith(off) for note in result["paths"]["nccl"]["notes"])
    # a release without it (before 0.5.14): nothing to pass
    assert facts()["no_fusion_flag"] == []
    assert ap.decide("nccl", facts(), dict(tp_size=2))["server_args"] == []


def test_auto_never_refuses_and_reports_the_fusion_reason():
    result = ap.decide("auto", facts(), dict(tp_size=1))
    assert result["path"] == "nccl" and "no all-reduce to fuse" in result["why"]
    assert result["candidates"] == ["nccl"]


def test_a_reason_found_elsewhere_refuses_its_path():
    result = ap.decide("auto", facts(), dict(tp_size=2, autotune_dir="/x", fusion_unavailable="canary FAILED",
                                             pcie_ipc_unavailable="pcie canary FAILED"))
    assert result["candidates"] == ["nccl"] and result["refused"]["pcie_ipc"] == ["pcie canary FAILED"]


@pytest.mark.parametrize("setup,needle", [
    (dict(), "tp_size must be an integer"), (dict(tp_size=True), "tp_size must be an integer"),
    (dict(tp_size=4, ep_size=3), "does not divide"), (dict(tp_size=2, autotune_dir="rel"), "absolute path"),
    (dict(tp_size=2, autotune_dir="/a\nB=1"), "absolute path"), (dict(tp_size=2, environment=["x"]), "mapping"),
])
def test_bad_setups(setup, needle):
    with pytest.raises(ap.PathsError) as caught:
        ap.decide("auto", facts(), setup)
    assert needle in caught.value.msg
    with pytest.raises(ap.PathsError):
        ap.decide("nvls", facts(), dict(tp_size=2))


def test_writable_problem(tmp_path):
    me = getpass.getuser()
    assert ap.writable_problem(str(tmp_path / "a" / "b"), me) is None
    assert "does not exist" in ap.writable_problem(str(tmp_path), "no-such-user-here")
    if os.geteuid() == 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o755)
        assert "not writable by nobody" in ap.writable_problem(str(locked / "x"), "nobody")
        locked.chmod(0o777)
        assert ap.writable_problem(str(locked / "x"), "nobody") is None


SERVER = dict(tp_size=8, autotune_dir="/var/lib/sglang/flashinfer/autotune", speculative=True,
              speculative_num_draft_tokens=4, cuda_graph_max_bs=16, hidden_size=7168)
KEY = {"venv": "/opt/sglang/venvs/a", "world_size": 8, "hidden": 7168, "max_numel": 458752, "max_batch": 16,
       "draft_tokens": 4, "gpu": None, "canary": None}  # the GPUs, driver and canary script unknown


GPU = {"gpus": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8, "driver": "580.65.06"}


def canary(record=None, text=None, gpu=None, version=None):
    """The canary context with only PCIe IPC's record given."""
    if record is not None:
        text = json.dumps(record)
    return {"venv_real": "/opt/sglang/venvs/a", "gpu": gpu, "version": version, "tokens": "1,2,4,8,16,32,64,128",
            "records": {"pcie_ipc": {"path": "/var/lib/sglang/pcie-ipc-canary.json", "text": text}}}


def test_the_pcie_ipc_canary_key_is_the_server_it_proves():
    result = ap.decide_with_canaries("auto", facts(), SERVER, context=canary())
    assert result["canaries"]["pcie_ipc"]["key"] == KEY
    unsized = ap.decide_with_canaries("auto", facts(), dict(SERVER, cuda_graph_max_bs=None), context=canary())
    assert unsized["canaries"]["pcie_ipc"]["key"]["max_numel"] is None  # SGLang sizes it itself: the canary as SGLang


def test_pcie_ipc_is_due_its_canary_until_one_for_this_server_is_recorded():
    for record, why in ((None, "none recorded"), (dict(key=dict(KEY, world_size=4), passed=True), "another venv"),
                        ("{not json", "cannot be read")):
        given = canary(text=record) if isinstance(record, str) or record is None else canary(record)
        result = ap.decide_with_canaries("auto", facts(), SERVER, context=given)
        assert result["canaries"]["pcie_ipc"]["state"] == "due" and why in result["canaries"]["pcie_ipc"]["why"]
        assert "pcie_ipc" in result["candidates"]  # runnable, pending its canary (the role runs it, then asks again)


def test_another_driver_or_other_gpus_make_the_canary_due_again():
    key = ap.decide_with_canaries("auto", facts(), SERVER, context=canary(gpu=GPU))["canaries"]["pcie_ipc"]["key"]
    assert key == dict(KEY, gpu=GPU)
    record = dict(key=key, passed=False, summary="pcie_ipc canary FAILED")
    assert ap.decide_with_canaries("auto", facts(), SERVER, context=canary(record, gpu=GPU))["canaries"]["pcie_ipc"][
        "state"] == "failed"
    for other in (dict(GPU, driver="590.10.01"), dict(GPU, gpus=GPU["gpus"][:7] + ["NVIDIA H200"]), None):
        state = ap.decide_with_canaries("auto", facts(), SERVER, context=canary(record, gpu=other))["canaries"]["pcie_ipc"]
        assert state["state"] == "due" and "GPUs, driver" in state["why"]


def test_a_verdict_of_another_canary_script_makes_the_canary_due_again():
    # a collection whose canary checks more (new shapes, SGLang's own call) proves every host again
    key = ap.decide_with_canaries("auto", facts(), SERVER, context=canary(version="a1b2"))["canaries"]["pcie_ipc"]["key"]
    assert key == dict(KEY, canary="a1b2")
    record = dict(key=key, passed=True, summary="pcie_ipc canary PASSED")
    assert ap.decide_with_canaries("auto", facts(), SERVER, context=canary(record, version="a1b2"))["canaries"]["pcie_ipc"][
        "state"] == "passed"
    state = ap.decide_with_canaries("auto", facts(), SERVER, context=canary(record, version="c3d4"))["canaries"]["pcie_ipc"]
    assert state["state"] == "due" and "canary script" in state["why"]


def test_a_passed_canary_keeps_pcie_ipc_and_a_failed_one_refuses_both_ipc_paths():
    passed = ap.decide_with_canaries("auto", facts(), SERVER, context=canary(dict(key=KEY, passed=True, summary="ok")))
    assert passed["canaries"]["pcie_ipc"]["state"] == "passed" and "pcie_ipc" in passed["candidates"]
    failed = canary(dict(key=KEY, passed=False, summary="pcie_ipc canary FAILED: tokens 60: 3 NaN/Inf"))
    result = ap.decide_with_canaries("auto", facts(), SERVER, context=failed)
    assert result["canaries"]["pcie_ipc"]["state"] == "failed"
    assert "pcie_ipc" not in result["candidates"] and "fusion+pcie_ipc" not in result["candidates"]
    assert "tokens 60: 3 NaN/Inf" in result["refused"]["pcie_ipc"][0]
    assert "delete /var/lib/sglang/pcie-ipc-canary.json" in result["refused"]["pcie_ipc"][0]
    with pytest.raises(ap.PathsError) as caught:
        ap.decide_with_canaries("pcie_ipc", facts(), SERVER, context=failed)
    assert "unproven here" in caught.value.msg and caught.value.result["canaries"]["pcie_ipc"]["state"] == "failed"


def test_a_canary_needs_one_gpu_per_process_of_the_tp_group():
    result = ap.decide_with_canaries("auto", facts(), SERVER, context=canary(gpu=dict(GPU, gpus=GPU["gpus"][:2])))
    assert result["canaries"]["pcie_ipc"]["state"] == "cannot_run" and result["canaries"]["pcie_ipc"]["argv"] == []
    said = " ".join(result["refused"]["pcie_ipc"])
    assert "(8) on this host, which has 2: the tensor-parallel size (sglang_server_tp_size) is above" in said
    assert "gpu_preflight" not in said  # its GPU facts were read: no advice to read them


def test_without_a_hidden_size_the_canary_cannot_run_and_pcie_ipc_is_refused():
    result = ap.decide_with_canaries("auto", facts(), dict(SERVER, hidden_size=None), context=canary())
    assert result["canaries"]["pcie_ipc"]["state"] == "cannot_run"
    assert "needs the model's hidden size" in " ".join(result["refused"]["pcie_ipc"])


def test_where_pcie_ipc_cannot_run_anyway_no_canary_is_asked_for():
    result = ap.decide_with_canaries("auto", facts(flashinfer_version="0.6.18"), SERVER, context=canary())
    assert result["canaries"]["pcie_ipc"]["state"] == "not_needed"
    assert ap.decide_with_canaries("auto", facts(), SERVER) == ap.decide("auto", facts(), SERVER)  # no file: as before
