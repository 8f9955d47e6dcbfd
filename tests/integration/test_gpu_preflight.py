"""gpu_preflight through real Ansible on this machine, with GPUs simulated by the nvidia-smi stand-in.

The stand-in replays a profile: our constructed SM120 hosts (lab/gpu-profiles/) or the real H200 capture
(built from ../shared by lab/make-h200-profile.py). Each refusal must say what is wrong and how to fix it.
"""
import os
import subprocess
import sys

import pytest

from tests.helpers.ansible_run import failure, run_playbook, task_results
from tests.helpers.gpu_fixtures import MAKE_H200, PROFILES, STANDIN, shared

PLAYBOOK = "tests/playbooks/gpu_preflight_local.yml"
BASE_VARS = {
    "gpu_preflight_nvidia_smi": STANDIN,
    "gpu_preflight_flashinfer_jit_cache": True,  # nvcc is tested on its own below
    "gpu_preflight_python": sys.executable,
    "gpu_preflight_disk_space": [{"path": "/tmp", "min_free_gb": 0.01}],
}


def preflight(profile_dir, **overrides):
    variables = dict(BASE_VARS, **overrides)
    rc, report = run_playbook(PLAYBOOK, variables, env={"NVIDIA_SMI_STANDIN_PROFILE_DIR": profile_dir})
    return rc, report


def facts_of(report):
    for name, result in task_results(report):
        if name == "Read nvidia-smi into facts":
            return result["ansible_facts"]["nvidia_gpu"]
    raise AssertionError("no facts task")


def fact(report, key):
    for _name, result in reversed(task_results(report)):
        if key in result.get("ansible_facts", {}):
            return result["ansible_facts"][key]
    raise AssertionError("fact %s never set" % key)


def test_sm120_host_passes_and_allows_fusion():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-8x-pcie"), gpu_preflight_expected_gpu_count=8)
    assert rc == 0, failure(report)
    facts = facts_of(report)
    assert facts["gpu_count"] == 8 and facts["compute_capabilities"] == ["12.0"] and not facts["nvlink"]
    assert fact(report, "gpu_preflight_fusion_allowed") is True


def test_h200_in_blackwell_group_fails_with_a_clear_message(tmp_path):
    shared("h200x2-nvlink")
    out = str(tmp_path / "h200")
    subprocess.run([sys.executable, MAKE_H200, "--out", out], check=True, capture_output=True)
    rc, report = preflight(out)
    assert rc != 0
    task, msg = failure(report)
    assert task == "Require GPUs of an accepted compute capability"
    assert "NVIDIA H200 (compute capability 9.0)" in msg and "12.x" in msg and "Move the host" in msg


def test_p2p_blocked_topology_refuses_fusion():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-p2p-blocked"))
    assert rc != 0
    task, msg = failure(report)
    assert task == "Refuse fusion where it cannot work"
    assert "peer-to-peer is not OK" in msg and "GPU0-GPU1" in msg and "gpu_preflight_allow_without_fusion" in msg


def test_p2p_blocked_topology_can_deploy_without_fusion_when_allowed():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-p2p-blocked"),
                           gpu_preflight_allow_without_fusion=True)
    assert rc == 0, failure(report)
    assert fact(report, "gpu_preflight_fusion_allowed") is False
    assert "peer-to-peer" in fact(report, "gpu_preflight_fusion_refusal")


def test_gpu_count_mismatch_fails():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-pcie"), gpu_preflight_expected_gpu_count=8)
    assert rc != 0
    task, msg = failure(report)
    assert task == "Require the expected number of GPUs"
    assert "shows 2 GPU(s), 8 expected" in msg


def test_missing_nvidia_smi_is_a_clear_failure_not_a_traceback():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-pcie"),
                           gpu_preflight_nvidia_smi="/nonexistent/nvidia-smi")
    assert rc != 0
    task, msg = failure(report)
    assert task == "Read nvidia-smi into facts"
    assert "nvidia-smi" in msg and "Traceback" not in msg


def test_missing_nvcc_refuses_fusion_naming_what_was_sought():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-pcie"), gpu_preflight_flashinfer_jit_cache=False,
                           gpu_preflight_nvcc_paths=["/nonexistent/nvcc"])
    assert rc != 0
    _task, msg = failure(report)
    assert "nvcc not found" in msg and "/nonexistent/nvcc" in msg and ">= 12.8" in msg


@pytest.mark.skipif(not os.path.exists("/usr/local/cuda/bin/nvcc") and not any(
    os.path.exists(os.path.join(p, "nvcc")) for p in os.environ.get("PATH", "").split(os.pathsep)),
    reason="no nvcc on this machine")
def test_real_nvcc_is_found_and_its_version_read():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-pcie"), gpu_preflight_flashinfer_jit_cache=False)
    assert rc == 0, failure(report)
    assert fact(report, "gpu_preflight_fusion_allowed") is True


def test_not_enough_disk_fails_with_figures():
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-pcie"),
                           gpu_preflight_disk_space=[{"path": "/tmp/does/not/exist/yet", "min_free_gb": 10 ** 9}])
    assert rc != 0
    task, msg = failure(report)
    assert task == "Require free disk space" and "GB free" in msg and "/tmp/does/not/exist/yet" in msg


def test_a_run_that_installs_nothing_is_not_refused_for_space_it_does_not_use():
    why = "install, model and code as the last converge left them: nothing to install or fetch"
    rc, report = preflight(os.path.join(PROFILES, "rtxpro6000-2x-pcie"),
                           gpu_preflight_disk_space=[{"path": "/tmp/does/not/exist/yet", "min_free_gb": 10 ** 9}],
                           gpu_preflight_check_disk_space=False, gpu_preflight_check_disk_space_why=why)
    assert rc == 0, failure(report)
    said = [result["msg"] for name, result in task_results(report) if name == "Say why free space is not checked"]
    assert said == ["Free space not checked on localhost: %s." % why]
