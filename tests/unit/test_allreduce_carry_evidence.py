"""The all-reduce canaries' carry on a real H200 (one GPU was lent): what scripts/device/allreduce_canary_evidence.sh
recorded with STEPS=jit_build (tests/fixtures/device/h200x1_flashinfer_jit_*.json, docs/allreduce-paths.md).

Cold: a bare machine built FlashInfer 0.7.2's trtllm_comm and pcie_ipc_comm modules from the trimmed carry and
returned the JIT cache. Cached: another bare machine, given that cache (JIT_CACHE), built nothing again."""
import json
import os
import re

import pytest

from tests.helpers.ansible_run import REPO
from tests.helpers.script_module import load_file

DEVICE = os.path.join(REPO, "tests", "fixtures", "device")
STEP = re.compile(r"jit_(\w+): rc=(\d+) wall=(\d+)s$")
bw = load_file("scripts/device/build_wheelhouse.py", "build_wheelhouse")


def bundle(name):
    with open(os.path.join(DEVICE, "h200x1_flashinfer_jit_%s.json" % name), encoding="utf-8") as handle:
        return json.load(handle)


def builds(record):
    return {m.group(1): (int(m.group(2)), int(m.group(3))) for m in map(STEP.search, record["steps"]) if m}


@pytest.mark.parametrize("name", ["cold", "cached"])
def test_flashinfer_072_runs_on_the_image_torch_with_pcie_ipc(name):
    machine = bundle(name)["machine"]
    assert "torch 2.11.0+cu130 nccl (2, 28, 9)" in machine
    assert "flashinfer 0.7.2 PcieIpcAllReduceWorkspace True" in machine
    assert any(line.startswith("GPU 0: NVIDIA H200") for line in machine)


@pytest.mark.parametrize("name", ["cold", "cached"])
def test_what_ran_is_the_shipped_carry_lock(name):
    installed = sorted(line[:-len(".dist-info")] for line in bundle(name)["machine"] if line.endswith(".dist-info"))
    pins = bw.read_pins(os.path.join(REPO, "scripts", "device", "allreduce-canary-h200-cp312.txt"))
    assert installed == sorted("%s-%s" % (bw.normalize(n).replace("-", "_"), v) for n, v in pins)


def test_both_comm_modules_built_and_the_returned_cache_spared_the_second_machine_the_build():
    cold, cached = builds(bundle("cold")), builds(bundle("cached"))
    assert set(cold) == set(cached) == {"trtllm_comm", "pcie_ipc_comm"}
    assert all(rc == 0 for rc, _ in list(cold.values()) + list(cached.values()))
    assert cold["trtllm_comm"][1] > 120  # nvcc ran
    assert all(wall < 30 for _, wall in cached.values())  # loaded, not built
    assert "allreduce_canary: JIT cache from .device/jit-cache unpacked" in bundle("cached")["steps"]
    assert not any("JIT cache from" in line for line in bundle("cold")["steps"])
