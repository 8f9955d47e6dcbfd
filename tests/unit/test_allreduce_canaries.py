"""Each kernel held to its canary through KERNELS in module_utils/allreduce_paths.py: the fused kernel's key and
arguments, and a fake third kernel whose rules and canary live in KERNELS only (the table is generic)."""
import json

import pytest

from ansible.module_utils import allreduce_paths as ap
from tests.unit.test_allreduce_paths import GPU, SERVER, facts

TOKENS = "1,2,4,8,16,32,64,128"


def context(**records):
    """Records given as {kernel: dict (recorded) | None (none recorded)}."""
    return {"venv_real": "/opt/sglang/venvs/a", "gpu": GPU, "version": "a1b2", "tokens": TOKENS,
            "records": dict((name, {"path": "/var/lib/sglang/%s.json" % name,
                                    "text": None if record is None else json.dumps(record)})
                            for name, record in records.items())}


def test_the_fusion_canary_key_is_the_servers_shapes_gpus_and_script():
    state = ap.decide_with_canaries("auto", facts(), SERVER, context=context(fusion=None))["canaries"]["fusion"]
    assert state["state"] == "due" and state["gpus"] == 8 and state["file"] == "/var/lib/sglang/fusion.json"
    assert state["key"] == {"venv": "/opt/sglang/venvs/a", "world_size": 8, "hidden": 7168, "tokens": TOKENS,
                            "draft_tokens": 4, "max_batch": 16, "gpu": GPU, "canary": "a1b2"}
    assert state["argv"] == ["--path", "fusion", "--hidden", "7168", "--tokens", TOKENS, "--draft-tokens", "4",
                             "--max-batch", "16"]
    # no draft tokens: today's sizes only; draft tokens without a CUDA-graph max batch: SGLang's own 32
    plain = dict(SERVER, speculative=False, speculative_num_draft_tokens=None)
    assert ap.decide_with_canaries("auto", facts(), plain, context=context(fusion=None))["canaries"]["fusion"][
        "argv"] == ["--path", "fusion", "--hidden", "7168", "--tokens", TOKENS]
    unsized = ap.decide_with_canaries("auto", facts(), dict(SERVER, cuda_graph_max_bs=None),
                                      context=context(fusion=None))["canaries"]["fusion"]
    assert unsized["key"]["max_batch"] == 32


def test_a_failed_fusion_canary_refuses_both_fusion_paths_and_keeps_its_figures():
    key = ap.decide_with_canaries("auto", facts(), SERVER, context=context(fusion=None))["canaries"]["fusion"]["key"]
    record = {"key": key, "passed": False, "summary": "fusion canary FAILED: tokens 12", "max_abs_err": 14.6}
    result = ap.decide_with_canaries("auto", facts(), SERVER, context=context(fusion=record, pcie_ipc=None))
    assert result["canaries"]["fusion"]["state"] == "failed" and result["canaries"]["fusion"]["record"] == record
    assert result["candidates"] == ["pcie_ipc", "nccl"] and result["path"] == "nccl"
    assert "fusion is unproven here" in result["refused"]["fusion+pcie_ipc"][-1]
    # a reason found elsewhere (the patch is absent) does not hide the recorded verdict
    held = ap.decide_with_canaries("auto", facts(), dict(SERVER, fusion_unavailable="no patch"),
                                   context=context(fusion=record))
    assert held["canaries"]["fusion"]["state"] == "failed" and held["refused"]["fusion"][0].startswith("no patch; ")
    # ... but no canary is due where the kernel could not serve anyway (an unpatched venv would fail it)
    unpatched = ap.decide_with_canaries("auto", facts(), dict(SERVER, fusion_unavailable="no patch"),
                                        context=context(fusion=None))["canaries"]["fusion"]
    assert unpatched["state"] == "not_needed" and "no patch" in unpatched["why"]


def test_a_fake_third_kernel_is_held_to_its_canary_through_its_kernels_entry_alone(monkeypatch):
    def rules(found, setup, runs):
        return ([] if found["flashinfer_version"] else ["no flashinfer"]), [], ({"QUICK": "1" if runs else "0"}), []

    quick = {"rules": rules, "canary": {
        "key": lambda ctx, setup, env: {"venv": ctx["venv_real"], "world_size": setup["tp_size"],
                                        "hidden": setup.get("hidden_size"), "gpu": ctx["gpu"], "env": env},
        "argv": lambda key, tokens: ["--path", "quick", "--tokens", tokens]}}
    monkeypatch.setitem(ap.KERNELS, "quick", quick)
    monkeypatch.setattr(ap, "AUTO_ORDER", ("quick",) + ap.AUTO_ORDER)
    monkeypatch.setattr(ap, "REQUESTS", ap.REQUESTS + ("quick",))

    due = ap.decide_with_canaries("auto", facts(), SERVER, context=context(quick=None))
    assert due["canaries"]["quick"]["state"] == "due" and "quick" in due["candidates"]
    assert due["canaries"]["quick"]["argv"] == ["--path", "quick", "--tokens", TOKENS]
    assert due["canaries"]["quick"]["environment"] == {"QUICK": "1"}
    failed = {"key": due["canaries"]["quick"]["key"], "passed": False, "summary": "quick canary FAILED"}
    result = ap.decide_with_canaries("auto", facts(), SERVER, context=context(quick=failed))
    assert result["canaries"]["quick"]["state"] == "failed" and "quick" not in result["candidates"]
    assert "fusion" in result["candidates"]  # the other kernels' paths are untouched
    with pytest.raises(ap.PathsError) as caught:
        ap.decide_with_canaries("quick", facts(), SERVER, context=context(quick=failed))
    assert "quick canary FAILED" in caught.value.msg
    assert ap.unavailable_param("quick") == "quick_unavailable"
    # its record: the dashed name in the one folder the role gives, beside the others (no option, no layout variable)
    assert ap.canary_records("/var/lib/sglang") == [("fusion", "/var/lib/sglang/fusion-canary.json"),
                                                    ("pcie_ipc", "/var/lib/sglang/pcie-ipc-canary.json"),
                                                    ("quick", "/var/lib/sglang/quick-canary.json")]


@pytest.mark.parametrize("sizing", [{"cuda_graph_max_bs": -4}, {"cuda_graph_max_bs": "8 --out /etc/passwd"},
                                    {"speculative_num_draft_tokens": 0}, {"hidden_size": True}])
def test_a_canarys_arguments_come_only_from_positive_whole_numbers(sizing):
    # what the removed fusion_patch entry point checked in a key it was handed: the key is built here, from the
    # validated setup, so a sizing that is not a positive whole number never reaches the canary's command line
    with pytest.raises(ap.PathsError, match=list(sizing)[0]):
        ap.decide_with_canaries("auto", facts(), dict(SERVER, **sizing), context=context(fusion=None, pcie_ipc=None))


def test_every_key_names_the_canary_script_that_runs():
    states = ap.decide_with_canaries("auto", facts(), SERVER, context=context(fusion=None, pcie_ipc=None))["canaries"]
    assert {state["key"]["canary"] for state in states.values()} == {"a1b2"}
    recorded = dict(key=dict(states["pcie_ipc"]["key"], canary="0123456789abcdef"), passed=True)
    again = ap.decide_with_canaries("auto", facts(), SERVER, context=context(pcie_ipc=recorded))["canaries"]
    assert again["pcie_ipc"]["state"] == "due" and "canary script" in again["pcie_ipc"]["why"]
