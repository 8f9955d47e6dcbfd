"""The device playbook puts a carried trtllm_comm kernel where the real FlashInfer (0.6.18, sglang 0.5.17's on the
test bed) loads prebuilt kernels before it would build one, read from the wheel's own source."""
import os
import re
import zipfile

import pytest
import yaml

from tests.helpers import wheels

pytestmark = pytest.mark.wheels

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def source(rel):
    with zipfile.ZipFile(wheels.wheel("flashinfer-python", "0.6.18")) as archive:
        return archive.read(rel).decode("utf-8")


def carry_destination():
    with open(os.path.join(REPO, "scripts", "device", "sglang_e2e.yml"), encoding="utf-8") as handle:
        play = yaml.safe_load(handle)[0]
    (block,) = [t for t in play["tasks"] if t.get("name") == "Carried FlashInfer kernel"]
    (copy,) = [t for t in block["block"] if "ansible.builtin.copy" in t]
    return copy["ansible.builtin.copy"]["dest"]


def test_the_carried_kernel_lands_on_flashinfers_prebuilt_path():
    env, core = source("flashinfer/jit/env.py"), source("flashinfer/jit/core.py")
    # without the flashinfer-jit-cache package, prebuilt kernels are looked up under the package's data/aot
    assert re.search(r'return _package_root / "data" / "aot"', env)
    # ... as <aot dir>/<name>/<name>.so, and loaded before any build is tried
    assert 'return jit_env.FLASHINFER_AOT_DIR / self.name / f"{self.name}.so"' in core
    load = core[core.index("    def build_and_load(self)"):]
    assert load.index("self.try_load()") < load.index("self.build()")
    comm = source("flashinfer/jit/comm.py")
    assert re.search(r'def gen_trtllm_comm_module\(\).*?return gen_jit_spec\(\s*"trtllm_comm",', comm, re.S)
    dest = carry_destination()
    assert dest.endswith("/site-packages/flashinfer/data/aot/trtllm_comm/trtllm_comm.so")
