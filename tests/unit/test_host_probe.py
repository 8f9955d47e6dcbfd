"""module_utils/host_probe.py (what gpu_preflight reads besides the GPUs) and the gpu_host_facts module that runs
it, through real Ansible (ad-hoc, local connection)."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ansible.module_utils import host_probe as hp
from tests.helpers.ansible_run import module_doc, run_module

NVCC_12_8 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0
"""

# lspci -vvv of two root ports and a GPU, trimmed: ACSCap lists what a port can do (ReqRedir+ there is no
# redirection), ACSCtl what it does.
LSPCI = """00:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge
\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx+
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-

00:03.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-

40:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge
\tCapabilities: [2a0 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-

41:00.0 VGA compatible controller: NVIDIA Corporation GB202GL [RTX PRO 6000 Blackwell Server Edition] (rev a1)
\tSubsystem: NVIDIA Corporation Device 204e
\tKernel driver in use: nvidia
"""


# ---------------------------------------------------------------------------------------------------------------
# nvcc and Python


def test_nvcc_version_is_the_release_of_the_first_line_naming_one():
    assert hp.nvcc_version(NVCC_12_8) == "12.8"
    assert hp.nvcc_version("Cuda compilation tools, release 13.0, V13.0.88\nrelease 9.9\n") == "13.0"
    # sed's greedy .*: the last "release N" of a line.
    assert hp.nvcc_version("old release 11.0 then release 12.9, V12.9.41") == "12.9"


@pytest.mark.parametrize("text", ["", None, "nvcc: NVIDIA (R) Cuda compiler driver\n", "release candidate\n",
                                  "Cuda compilation tools, release , V12\n"])
def test_nvcc_version_is_empty_without_a_release(text):
    assert hp.nvcc_version(text) == ""


def test_python_version_read_or_why_not():
    assert hp.python_version(0, "3.12.3\n", "") == ("3.12.3", None)
    assert hp.python_version(1, "", "Traceback...\nSyntaxError: bad\n") == ("", "exits with rc 1: SyntaxError: bad")
    assert hp.python_version(127, "", "") == ("", "exits with rc 127")
    assert hp.python_version(0, "Python 2.7.18\n", "") == ("", "printed 'Python 2.7.18', not a version")


# ---------------------------------------------------------------------------------------------------------------
# Free disk


@pytest.mark.parametrize("path, parent", [("/opt/sglang", "/opt"), ("/opt/sglang/", "/opt"), ("/opt", "/"),
                                          ("/", "/"), ("//", "/"), ("opt", "."), ("opt/x", "opt"), ("", ".")])
def test_posix_dirname_is_dirname_1(path, parent):
    assert hp.posix_dirname(path) == parent


def test_nearest_existing_ancestor():
    existing = {"/", "/opt"}
    assert hp.nearest_existing("/opt/sglang/venvs/x", existing.__contains__) == "/opt"
    assert hp.nearest_existing("/opt", existing.__contains__) == "/opt"
    assert hp.nearest_existing("/srv/models", existing.__contains__) == "/"
    assert hp.nearest_existing("/srv/models", lambda path: False) == "/"  # ends at / even when nothing exists


def test_nearest_existing_on_the_filesystem(tmp_path):
    assert hp.nearest_existing(str(tmp_path / "a" / "b" / "c")) == str(tmp_path)
    (tmp_path / "a").mkdir()
    assert hp.nearest_existing(str(tmp_path / "a" / "b" / "c")) == str(tmp_path / "a")


def test_free_kb_is_available_blocks_times_fragment_size():
    calls = []

    def statvfs(path):
        calls.append(path)
        return SimpleNamespace(f_bavail=1000, f_frsize=4096, f_bfree=5000, f_bsize=8192)

    assert hp.free_kb("/opt", statvfs) == 4000
    assert hp.disk_free("/opt/sglang/venvs", {"/", "/opt"}.__contains__, statvfs) == {
        "path": "/opt/sglang/venvs", "checked_path": "/opt", "free_kb": 4000}
    assert calls == ["/opt", "/opt"]
    assert hp.free_kb("/x", lambda path: SimpleNamespace(f_bavail=3, f_frsize=512)) == 1  # rounded down


def test_free_kb_matches_df(tmp_path):
    proc = subprocess.run(["df", "-Pk", str(tmp_path)], capture_output=True, text=True, check=True)
    df_kb = int(proc.stdout.splitlines()[1].split()[3])
    assert abs(hp.free_kb(str(tmp_path)) - df_kb) <= 1024 * 1024  # the same figure, give or take other writers


# ---------------------------------------------------------------------------------------------------------------
# ACS and IOMMU groups


def test_acs_counts_control_lines_and_redirecting_ones():
    assert hp.summarize_acs(LSPCI) == {"lspci": True, "ports_with_acs": 3, "ports_redirecting": 2}


def test_acs_without_acs_lines_or_without_lspci():
    gpu_only = "\n".join(line for line in LSPCI.splitlines() if "ACS" not in line)
    assert hp.summarize_acs(gpu_only) == {"lspci": True, "ports_with_acs": 0, "ports_redirecting": 0}
    assert hp.summarize_acs("") == {"lspci": True, "ports_with_acs": 0, "ports_redirecting": 0}
    assert hp.summarize_acs(None) == {"lspci": False, "ports_with_acs": 0, "ports_redirecting": 0}


def test_acs_redirect_flags_on_their_own():
    assert hp.summarize_acs("\tACSCtl:\tSrcValid+ ReqRedir+ CmpltRedir-\n")["ports_redirecting"] == 1
    assert hp.summarize_acs("\tACSCtl:\tSrcValid+ ReqRedir- CmpltRedir+\n")["ports_redirecting"] == 1
    assert hp.summarize_acs("\tACSCtl:\tSrcValid+ ReqRedir- CmpltRedir-\n")["ports_redirecting"] == 0
    assert hp.summarize_acs("\tACSCap:\tReqRedir+ CmpltRedir+\n") == {"lspci": True, "ports_with_acs": 0,
                                                                     "ports_redirecting": 0}


def test_iommu_groups_counts_directories_only(tmp_path):
    groups = tmp_path / "iommu_groups"
    for number in ("0", "1", "17"):
        (groups / number / "devices").mkdir(parents=True)
    (groups / ".hidden").mkdir()
    (groups / "stray-file").write_text("")
    os.symlink(str(groups / "0"), str(groups / "link"))
    assert hp.count_iommu_groups(str(groups)) == 3
    assert hp.count_iommu_groups(str(tmp_path / "missing")) == 0
    assert hp.count_iommu_groups(str(groups / "stray-file")) == 0


# ---------------------------------------------------------------------------------------------------------------
# The module, through real Ansible


def executable(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def bindir(tmp_path):
    """A PATH folder with a stand-in nvcc and lspci."""
    folder = tmp_path / "bin"
    folder.mkdir()
    executable(folder / "nvcc", "cat <<'EOF'\n%sEOF\n" % NVCC_12_8)
    executable(folder / "lspci", "[ \"$1\" = -vvv ] || exit 2\ncat <<'EOF'\n%sEOF\n" % LSPCI)
    return folder


def probe(args, bindir=None, check=False):
    env = {"PATH": str(bindir) + os.pathsep + os.environ["PATH"]} if bindir else None
    return run_module("gpu_host_facts", args, check=check, env=env)


def test_module_reads_everything_in_one_run(tmp_path, bindir):
    groups = tmp_path / "groups"
    for number in range(5):
        (groups / str(number)).mkdir(parents=True)
    result = probe({"python": sys.executable, "nvcc_paths": [str(tmp_path / "no" / "nvcc"), "nvcc"],
                    "disk_paths": [str(tmp_path / "not" / "yet"), str(tmp_path)],
                    "iommu_groups_dir": str(groups)}, bindir)
    assert not result.get("failed") and result["changed"] is False, result
    host = result["host"]
    assert host["python_version"] == "%d.%d.%d" % sys.version_info[:3] and host["python_error"] is None
    assert host["nvcc_version"] == "12.8" and host["nvcc_path"] == str(bindir / "nvcc")
    assert [(d["path"], d["checked_path"]) for d in host["disk"]] == [(str(tmp_path / "not" / "yet"), str(tmp_path)),
                                                                      (str(tmp_path), str(tmp_path))]
    assert all(isinstance(d["free_kb"], int) and d["free_kb"] > 0 for d in host["disk"])
    assert host["acs"] == {"lspci": True, "ports_with_acs": 3, "ports_redirecting": 2}
    assert host["iommu_groups"] == 5


def test_module_in_check_mode_reads_the_same(tmp_path, bindir):
    result = probe({"python": sys.executable, "nvcc_paths": [str(bindir / "nvcc")], "disk_paths": ["/"],
                    "iommu_groups_dir": str(tmp_path / "none")}, bindir, check=True)
    assert not result.get("failed") and result["changed"] is False, result
    assert result["host"]["python_version"] and result["host"]["nvcc_version"] == "12.8"
    assert result["host"]["iommu_groups"] == 0


def test_module_takes_the_first_nvcc_found_even_without_a_version(tmp_path, bindir):
    odd = executable(tmp_path / "odd-nvcc", "echo 'no release here'\nexit 1\n")
    executable(tmp_path / "not-executable", "")
    (tmp_path / "not-executable").chmod(0o644)
    result = probe({"nvcc_paths": [str(tmp_path / "not-executable"), odd, "nvcc"]}, bindir)
    assert result["host"]["nvcc_path"] == odd and result["host"]["nvcc_version"] == ""


def test_module_skips_nvcc_and_python_when_not_asked(bindir):
    host = probe({"nvcc_paths": []}, bindir)["host"]
    assert host["nvcc_version"] == "" and host["nvcc_path"] is None
    assert host["python_version"] == "" and host["python_error"] is None and host["disk"] == []


def test_a_python_that_is_missing_or_fails_is_reported_not_failed(tmp_path):
    missing = probe({"python": str(tmp_path / "python3")})
    assert not missing.get("failed"), missing
    assert missing["host"]["python_version"] == "" and missing["host"]["python_error"] == "not found"
    failing = probe({"python": executable(tmp_path / "python-broken", "echo 'broken install' >&2\nexit 3\n")})
    assert failing["host"]["python_error"] == "exits with rc 3: broken install"
    assert probe({"python": "no-such-python-here"})["host"]["python_error"] == "not found"


def test_module_refuses_bad_input_with_its_own_message(tmp_path):
    for args, needle in (({"disk_paths": ["opt/sglang"]}, "disk_paths must be absolute paths, got 'opt/sglang'"),
                         ({"nvcc_paths": "nvcc", "disk_paths": {"a": 1}}, "disk_paths"),
                         ({"bogus": 1}, "bogus")):
        result = probe(args)
        assert result.get("failed") and result["changed"] is False, result
        assert "Traceback" not in json.dumps(result) and "module_stderr" not in result, result
        assert needle in result["msg"], (needle, result["msg"])


def test_documentation_renders_and_matches_the_arguments():
    info = module_doc("gpu_host_facts")
    assert set(info["doc"]["options"]) == {"python", "nvcc_paths", "disk_paths", "iommu_groups_dir"}
    assert set(info["return"]["host"]["contains"]) == {"python_version", "python_error", "nvcc_version", "nvcc_path",
                                                       "nvcc_error", "disk", "acs", "iommu_groups"}
