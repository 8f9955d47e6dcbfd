"""FlashInfer's trtllm_comm kernel travels between device machines (scripts/device/sglang_e2e.py): found where the
server's FlashInfer built it, loaded as the server would load it (its unit's interpreter, user and environment), and,
carried back, placed where FlashInfer loads prebuilt kernels. No GPU here: the interpreter in the test unit is a
script of the test's that answers as the real JIT_LOAD snippet does."""
import getpass
import json
import os

import pytest

from tests.helpers.script_module import load_file

e2e = load_file("scripts/device/sglang_e2e.py", "sglang_e2e_carry")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def bed(tmp_path, monkeypatch):
    """A rendered unit whose environment file names the FlashInfer workspace, and the driver's folders in tmp."""
    workspace = tmp_path / "flashinfer"
    (tmp_path / "runtime.env").write_text("FLASHINFER_WORKSPACE_BASE=%s\nMARK=from-the-unit\n" % workspace)
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho building >&2\necho \"{\\\"prebuilt\\\": false, \\\"seconds\\\": 1.5, "
                      "\\\"mark\\\": \\\"$MARK\\\", \\\"code\\\": $(printf '%s' \"$2\" | wc -c)}\"\n")
    python.chmod(0o755)
    unit = tmp_path / "sglang.service"
    unit.write_text("[Service]\nUser=%s\nWorkingDirectory=%s\nEnvironmentFile=%s\nExecStart=%s -m sglang.launch_server\n"
                    % (getpass.getuser(), tmp_path, tmp_path / "runtime.env", python))
    # the run's settings and bookkeeping are e2e_bed.py's; the kernel's own paths are the setup phase's
    monkeypatch.setattr(e2e.bed, "unit_path", lambda index=0: str(unit))
    for module, name, value in ((e2e.bed, "STATE_DIR", tmp_path / "state"), (e2e.bed, "OUT", tmp_path / "out"),
                                (e2e.bed, "STATE", tmp_path / "state" / "state.json"),
                                (e2e, "BUILT_KERNEL", tmp_path / "state" / "k.so")):
        monkeypatch.setattr(module, name, str(value))
    os.makedirs(tmp_path / "out")
    os.makedirs(tmp_path / "state")
    return {"tmp": tmp_path, "workspace": workspace}


def test_the_kernel_is_found_under_the_servers_workspace_in_flashinfers_hidden_cache(bed):
    # where FlashInfer 0.6.18 builds it: $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<arch>/cached_ops/
    built = bed["workspace"] / ".cache" / "flashinfer" / "0.6.18" / "90" / "cached_ops" / "trtllm_comm"
    built.mkdir(parents=True)
    (built / "trtllm_comm.so").write_bytes(b"\x7fELF kernel")
    (built.parent / "norm").mkdir()
    (built.parent / "norm" / "trtllm_comm.so").write_bytes(b"not this one")  # only trtllm_comm's own folder counts
    state = {"steps": [], "legs": {}}
    e2e.collect_jit(state)
    assert open(e2e.BUILT_KERNEL, "rb").read() == b"\x7fELF kernel"
    assert state["trtllm_comm_built"] == str(built / "trtllm_comm.so")


def test_nothing_is_returned_where_nothing_was_built(bed):
    state = {"steps": [], "legs": {}}
    e2e.collect_jit(state)
    assert not os.path.exists(e2e.BUILT_KERNEL) and "trtllm_comm_built" not in state


def test_the_kernel_is_loaded_with_the_units_interpreter_and_environment(bed):
    state = {"steps": [], "legs": {}}
    assert e2e.load_kernel(state) == 0
    assert state["trtllm_comm"] == {"prebuilt": False, "seconds": 1.5, "mark": "from-the-unit",
                                    "code": len(e2e.JIT_LOAD)}
    assert [s["name"] for s in state["steps"]] == ["load_trtllm_comm"] and state["steps"][0]["rc"] == 0
    assert "building" in (bed["tmp"] / "out" / "load_trtllm_comm.log").read_text()


def test_a_failed_load_is_recorded_as_such(bed):
    (bed["tmp"] / "python").write_text("#!/bin/sh\necho 'ninja: build stopped' >&2\nexit 1\n")
    state = {"steps": [], "legs": {}}
    assert e2e.load_kernel(state) == 1
    assert state["trtllm_comm"] == {"error": "rc 1"}



def lock_pin(project):
    with open(os.path.join(REPO, "scripts", "device", "sglang-0.5.17-h200-cp312.txt"), encoding="utf-8") as handle:
        pins = dict(line.split("==", 1) for line in handle.read().split() if "==" in line)
    return pins[project]


def test_the_device_runs_built_it_once_and_the_next_bare_machine_loaded_the_carried_one():
    with open(os.path.join(REPO, "tests", "fixtures", "device", "h200x1_e2e_trtllm_comm_carry.json"),
              encoding="utf-8") as handle:
        runs = json.load(handle)
    built, carried = runs["built"], runs["carried"]
    assert built["machine"][1] != carried["machine"][1]  # two machines (GPU UUIDs)
    for run in (built, carried):
        assert all(step["rc"] == 0 for step in run["steps"])
        assert run["trtllm_comm"]["flashinfer"] == lock_pin("flashinfer-python")
    # nvcc on the bare machine, in the server's workspace, and returned from there
    assert built["trtllm_comm"]["prebuilt"] is False and built["trtllm_comm"]["seconds"] > 60
    assert built["trtllm_comm"]["library"].endswith("/cached_ops/trtllm_comm/trtllm_comm.so")
    assert built["trtllm_comm_built"] == built["trtllm_comm"]["library"]
    # carried: unpacked before the playbook, found prebuilt in the venv, nothing built
    names = [step["name"] for step in carried["steps"]]
    assert names.index("unpack_carried_trtllm_comm") < names.index("ansible_setup") < names.index("load_trtllm_comm")
    assert carried["trtllm_comm"]["prebuilt"] is True and carried["trtllm_comm"]["seconds"] < 5
    assert carried["trtllm_comm"]["library"].endswith("/site-packages/flashinfer/data/aot/trtllm_comm/trtllm_comm.so")
    assert carried["trtllm_comm_built"] is None
