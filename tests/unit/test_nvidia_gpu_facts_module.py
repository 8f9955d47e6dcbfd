"""nvidia_gpu_facts through real Ansible (ad-hoc, local connection), against the nvidia-smi stand-in."""
import json
import os
import shutil
import subprocess
import sys

from ansible.module_utils import nvidia_smi as smi
from tests.helpers.ansible_run import module_doc, run_module
from tests.helpers.gpu_fixtures import MAKE_H200, PROFILES, STANDIN, read_shared, shared


def gather(profile_dir, check=False, nvidia_smi=STANDIN):
    return run_module("nvidia_gpu_facts", {"nvidia_smi": nvidia_smi}, check=check,
                      env={"NVIDIA_SMI_STANDIN_PROFILE_DIR": profile_dir})


def test_8x_rtxpro6000_profile():
    result = gather(os.path.join(PROFILES, "rtxpro6000-8x-pcie"))
    assert not result.get("failed") and result["changed"] is False, result
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert facts["gpu_count"] == 8 and facts["compute_capabilities"] == ["12.0"]
    assert facts["nvlink"] is False and facts["all_p2p_ok"] is True
    assert facts["link_types"] == ["NODE", "PIX", "SYS"] and facts["driver_version"] == "580.105.08"
    assert facts["gpus"][7]["pci_bus_id"] == "00000000:BC:00.0" and facts["gpus"][7]["numa_affinity"] == "1"


def test_blocked_p2p_profile_in_check_mode():
    result = gather(os.path.join(PROFILES, "rtxpro6000-2x-p2p-blocked"), check=True)
    assert not result.get("failed") and result["changed"] is False, result
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert facts["all_p2p_ok"] is False and facts["p2p"]["GPU0"]["GPU1"] == "CNS"


def test_real_h200_capture_replayed(tmp_path):
    """The module's facts equal the parsers' own reading of the real capture."""
    shared("h200x2-nvlink")
    subprocess.run([sys.executable, MAKE_H200, "--out", str(tmp_path)], check=True, capture_output=True)
    result = gather(str(tmp_path))
    facts = result["ansible_facts"]["nvidia_gpu"]
    expected = smi.summarize(smi.parse_query_xml(read_shared("h200x2-nvlink", "nvidia-smi_-q_-x.xml")),
                             smi.parse_query_csv(read_shared("h200x2-nvlink", "nvidia-smi_query-gpu.csv")),
                             smi.parse_topo_matrix(read_shared("h200x2-nvlink", "nvidia-smi_topo_-m.txt")),
                             smi.parse_p2p_matrix(read_shared("h200x2-nvlink", "nvidia-smi_topo_-p2p_r.txt")))
    assert facts == json.loads(json.dumps(expected))
    assert facts["nvlink"] is True and facts["compute_capabilities"] == ["9.0"]


def assert_clean_failure(result, *needles):
    assert result.get("failed") and result["changed"] is False, result
    assert "Traceback" not in json.dumps(result) and "module_stderr" not in result, result
    for needle in needles:
        assert needle in result["msg"], (needle, result["msg"])


def test_missing_nvidia_smi_says_what_and_how(tmp_path):
    assert_clean_failure(gather(str(tmp_path), nvidia_smi=str(tmp_path / "nvidia-smi")),
                         "nvidia-smi not found", "is not an executable file", "install the driver")
    assert_clean_failure(gather(str(tmp_path), nvidia_smi="nvidia-smi-not-installed"),
                         "no 'nvidia-smi-not-installed' in PATH", "NVIDIA driver")


def test_failing_subcommand_fails_with_its_message(tmp_path):
    partial = tmp_path / "profile"
    shutil.copytree(os.path.join(PROFILES, "rtxpro6000-2x-pcie"), str(partial))
    os.remove(str(partial / "topo-p2p-r.txt"))
    result = gather(str(partial))
    assert_clean_failure(result, "`nvidia-smi topo -p2p r` failed (rc 3)", "has no topo-p2p-r.txt")
    assert result["rc"] == 3


def test_unreadable_output_fails_with_the_parser_message(tmp_path):
    partial = tmp_path / "profile"
    shutil.copytree(os.path.join(PROFILES, "rtxpro6000-2x-pcie"), str(partial))
    (partial / "topo-m.txt").write_text("No devices were found\n")
    assert_clean_failure(gather(str(partial)), "could not read the output of `nvidia-smi topo -m`", "no header")


def test_documentation_renders_and_matches_the_arguments():
    info = module_doc("nvidia_gpu_facts")
    assert set(info["doc"]["options"]) == {"nvidia_smi"}
    assert "nvidia_gpu" in info["return"]["ansible_facts"]["contains"]
