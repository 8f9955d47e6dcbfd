"""The module, through real Ansible, against real sglang + flashinfer-python wheels in real venvs.

Per release: install sglang with the flashinfer-python it pins (``pip install
--no-deps``). Where that pin predates SM12x support the module must refuse and
write nothing; then flashinfer-python is upgraded to a release that supports
SM12x (what an operator does) and the full idempotency contract runs:
check -> apply -> apply again -> absent (check) -> absent -> absent again.
"""
import glob
import hashlib
import os
import subprocess

import pytest

from tests.helpers import wheels
from tests.helpers.ansible_run import run_module
from tests.helpers.gate_check import gate_report, multicast_failure_raises

pytestmark = pytest.mark.wheels

RELEASES = wheels.RELEASES
SUPPORTED_FLASHINFER = "0.6.18"  # first line with SM12x trtllm kernels is 0.6.17; 0.6.18 is what 0.5.19/0.5.21 pin
GUARD_FILES = [
    "sglang/srt/layers/communicator.py",
    "sglang/srt/layers/layer_boundary/residual/add_norm.py",
    "sglang/srt/layers/flashinfer_comm_fusion.py",
]


def sha(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def guard_hashes(site):
    return {rel: sha(os.path.join(site, rel)) for rel in GUARD_FILES if os.path.exists(os.path.join(site, rel))}


def version_tuple(text):
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def compile_with_venv(venv, path):
    """Compile with the venv's interpreter without writing bytecode."""
    subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                    "import sys; compile(open(sys.argv[1], 'rb').read(), sys.argv[1], 'exec')", path],
                   check=True)


def assert_all_gates_admit(venv, site, changed_files):
    reports = {}
    for rel in GUARD_FILES:
        path = os.path.join(site, rel)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        report, unresolved = gate_report(source)
        assert not unresolved, "%s uses undefined names %s" % (rel, unresolved)
        assert all(admits for _f, _t, admits in report), "%s: %s" % (rel, report)
        assert not multicast_failure_raises(source), "%s: G3 still raises" % rel
        reports[rel] = report
    for path in changed_files:
        compile_with_venv(venv, path)
    assert any(reports.values()), "no gate found at all"


@pytest.mark.parametrize("release", RELEASES)
def test_full_cycle_on_real_release(release, tmp_path):
    sglang_whl = wheels.wheel("sglang", release)
    pinned = wheels.pinned_flashinfer(sglang_whl)
    try:
        pinned_whl = [wheels.wheel("flashinfer-python", pinned)]
    except wheels.NoWheel:  # e.g. 0.5.4 pins 0.4.1, published as an sdist only: start without it
        pinned_whl = []
    venv = wheels.make_venv(str(tmp_path / "venv"), sglang_whl, *pinned_whl)
    site = wheels.site_packages(venv)
    subprocess.run([os.path.join(venv, "bin", "python"), "-m", "compileall", "-q",
                    os.path.join(site, "sglang", "srt", "layers")], check=True)
    originals = {rel: wheels.original_bytes(sglang_whl, rel) for rel in guard_hashes(site)}
    pristine = guard_hashes(site)

    # The off switch (SGLang turns fusion on by itself on SM90/SM100 for the architectures it knows) is declared
    # from 0.5.14; the module reports it in every state, refusals included.
    no_fusion = ["--enforce-disable-flashinfer-allreduce-fusion"] if version_tuple(release) >= (0, 5, 14) else []

    if version_tuple(pinned) < (0, 6, 17):
        refused = run_module("sglang_fusion_patch", {"venv": venv})
        assert refused.get("failed"), refused
        assert refused["server_no_fusion_flag"] == no_fusion
        if pinned_whl:
            assert "flashinfer-python %s" % pinned in refused["msg"] and "garbage" in refused["msg"]
        else:
            assert "flashinfer-python is not installed" in refused["msg"]
        assert guard_hashes(site) == pristine
        assert not os.path.exists(os.path.join(venv, ".sglang-fusion-patch"))
        wheels.pip_install(venv, wheels.wheel("flashinfer-python", SUPPORTED_FLASHINFER))

    args = {"venv": venv}
    check = run_module("sglang_fusion_patch", args, check=True, diff=True)
    assert check["changed"] and not check.get("failed"), check
    assert guard_hashes(site) == pristine, "check mode wrote something"
    assert check["sglang_version"] == release
    assert check["server_no_fusion_flag"] == no_fusion
    assert len(check["diff"]) == len([f for f in check["files"] if f["changed"]])
    assert all(d["before"] != d["after"] for d in check["diff"])

    applied = run_module("sglang_fusion_patch", args, diff=True)
    assert applied["changed"], applied
    changed_paths = [f["path"] for f in applied["files"] if f["changed"]]
    assert {s["status"] for s in applied["sites"]} == {"patched"}
    gates = {s["gate"] for s in applied["sites"]}
    assert "G1" in gates
    if version_tuple(release) >= (0, 5, 14):
        assert {"G2", "G3"} <= gates
        assert applied["server_flag"] == ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    else:
        assert applied["server_flag"] == ["--enable-flashinfer-allreduce-fusion"]
    assert applied["server_no_fusion_flag"] == no_fusion
    for entry in applied["files"]:
        assert sha(entry["path"]) == entry["sha256_after"]
    assert_all_gates_admit(venv, site, changed_paths)
    for path in changed_paths:  # compileall above left bytecode; the patch must have removed it
        stem = os.path.splitext(os.path.basename(path))[0]
        assert not glob.glob(os.path.join(os.path.dirname(path), "__pycache__", stem + ".*.pyc"))

    again = run_module("sglang_fusion_patch", args)
    assert not again["changed"], again
    assert {s["status"] for s in again["sites"]} == {"already_admitted"}

    absent = dict(args, state="absent")
    check_absent = run_module("sglang_fusion_patch", absent, check=True)
    assert check_absent["changed"]
    assert [sha(p) for p in changed_paths] == [e["sha256_after"] for e in applied["files"] if e["changed"]]

    reverted = run_module("sglang_fusion_patch", absent)
    assert reverted["changed"], reverted
    assert reverted["server_no_fusion_flag"] == no_fusion
    for rel, data in originals.items():
        with open(os.path.join(site, rel), "rb") as handle:
            assert handle.read() == data, "%s is not byte-identical to the wheel's" % rel

    reverted_again = run_module("sglang_fusion_patch", absent)
    assert not reverted_again["changed"] and not reverted_again.get("failed"), reverted_again
    assert reverted_again["server_no_fusion_flag"] == no_fusion  # absent with nothing to restore: still said
