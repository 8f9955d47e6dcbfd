"""The canary mirrors each SGLang release's own call of FlashInfer's fused kernel, read from the real wheels."""
import os
import zipfile

import pytest

from tests.helpers import wheels
from tests.helpers.script_module import load_file

pytestmark = pytest.mark.wheels

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
canary = load_file("roles/sglang_allreduce/files/allreduce_canary.py", "fusion_canary_real")

FILES = (canary.SG_FUSION,) + canary.SG_CALLERS + canary.SG_MAX_BATCH


def call_of(release):
    with zipfile.ZipFile(wheels.wheel("sglang", release)) as archive:
        names = set(archive.namelist())
        texts = dict((rel, archive.read(rel).decode("utf-8")) for rel in FILES if rel in names)
    return canary.sglang_call(texts)


# fp32 accumulation became SGLang's default in 0.5.21; trigger_completion_at_end stays False throughout
# (FlashInfer's own default is True); the allreduce-only call (kAllReduce) arrived in 0.5.19.
@pytest.mark.parametrize("release,fp32_acc,ar_only", [
    ("0.5.14", False, None),
    ("0.5.17", False, None),
    ("0.5.19", False, {"fp32_acc": False, "trigger_completion_at_end": False, "launch_with_pdl": True}),
    ("0.5.21", True, {"fp32_acc": True, "trigger_completion_at_end": False, "launch_with_pdl": True}),
    ("0.5.23", True, {"fp32_acc": True, "trigger_completion_at_end": False, "launch_with_pdl": True}),
])
def test_each_release_call(release, fp32_acc, ar_only):
    call = call_of(release)
    assert call["use_oneshot"] is None, "FlashInfer's heuristic picks one-/two-shot"
    assert call["trigger_completion_at_end"] is False and call["passes_trigger"]
    assert call["fp32_acc"] is fp32_acc and call["launch_with_pdl"] is True
    assert call["workspace_tokens"] == 2048 and call["caller_overrides"] == []
    assert call["ar_only"] == ar_only


def test_flashinfer_defaults_trigger_to_true_where_sglang_passes_false():
    """The hazard's setting is SGLang's choice, not FlashInfer's default (vLLM forces True for one-shot)."""
    for version in ("0.6.18", "0.7.2"):
        with zipfile.ZipFile(wheels.wheel("flashinfer-python", version)) as archive:
            source = archive.read("flashinfer/comm/allreduce.py").decode("utf-8")
        signature = source[source.index("def allreduce_fusion("):]
        signature = signature[:signature.index(")")]
        assert "trigger_completion_at_end: bool = True" in signature, version


@pytest.mark.parametrize("release", ["0.5.21", "0.5.23"])
def test_each_release_pcie_ipc_sizing(release):
    """The PCIe IPC workspace as the release sizes it: Kimi-K2.5 at max batch 16 x 4 draft tokens is 64 rows."""
    with zipfile.ZipFile(wheels.wheel("sglang", release)) as archive:
        sizing = canary.sglang_pcie_sizing(archive.read(canary.SG_PCIE).decode("utf-8"))
    assert sizing == {"fallback_width": 64, "tune_rows": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)}
    assert canary.pcie_workspace(sizing, 7168, None, 16, 4)["tune_batches"] == [1, 2, 4, 8, 16, 32, 64]
