"""The nvidia-smi stand-in, run as a subprocess the way roles run the real tool."""
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess

import pytest

from ansible.module_utils import nvidia_smi as smi
from tests.helpers.gpu_fixtures import PROFILES, STANDIN, profile

EIGHT = "rtxpro6000-8x-pcie"


def standin(*args, profile_dir=os.path.join(PROFILES, EIGHT)):
    env = dict(os.environ, NVIDIA_SMI_STANDIN_PROFILE_DIR=profile_dir)
    return subprocess.run([STANDIN] + list(args), env=env, capture_output=True, text=True, check=False)


def test_replays_the_profile_byte_for_byte():
    assert standin("-q", "-x").stdout == profile(EIGHT, "q-x.xml")
    assert standin("-x", "-q").stdout == profile(EIGHT, "q-x.xml")
    assert standin("topo", "-m").stdout == profile(EIGHT, "topo-m.txt")
    assert standin("topo", "-p2p", "r").stdout == profile(EIGHT, "topo-p2p-r.txt")
    assert standin("topo", "-p2p", "rw").stdout == profile(EIGHT, "topo-p2p-r.txt")  # rw reuses r


def test_query_gpu_as_the_module_asks():
    proc = standin("--query-gpu=" + ",".join(smi.QUERY_FIELDS), "--format=csv")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "index, name, compute_cap, uuid, pci.bus_id, memory.total [MiB]"
    assert lines[1].startswith("0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, GPU-")
    assert lines[1].endswith(", 00000000:0B:00.0, 97887 MiB")
    rows = smi.parse_query_csv(proc.stdout)
    assert sorted(rows) == list(range(8)) and {r["compute_capability"] for r in rows.values()} == {"12.0"}


def test_query_gpu_selects_reorders_and_drops_units_and_header():
    proc = standin("--query-gpu", "memory.total,gpu_name,index", "--format", "csv,noheader,nounits")
    assert proc.stdout.splitlines()[7] == "97887, NVIDIA RTX PRO 6000 Blackwell Server Edition, 7"
    with_header = standin("--query-gpu=power.limit,gpu_bus_id", "--format=csv,nounits").stdout.splitlines()
    assert with_header[:2] == ["power.limit [W], pci.bus_id", "600.00, 00000000:0B:00.0"]  # header keeps units


def test_unknown_field_fails_like_the_real_tool():
    proc = standin("--query-gpu=index,clocks.bogus", "--format=csv")
    assert proc.returncode == 2 and proc.stdout == ""
    assert 'Field "clocks.bogus" is not a valid field to query.' in proc.stderr


def test_list_gpus_from_the_csv():
    lines = standin("-L").stdout.splitlines()
    assert len(lines) == 8
    assert lines[3].startswith("GPU 3: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-")


@pytest.mark.parametrize("args", [["--help"], ["--version"], []])
def test_says_it_is_a_stand_in(args):
    proc = standin(*args)
    assert proc.returncode == 0 and "STAND-IN" in proc.stdout
    if args == ["--version"]:
        assert "DRIVER version      : 580.105.08" in proc.stdout and "CUDA Version        : 13.0" in proc.stdout


@pytest.mark.parametrize("args", [["-q"], ["--bogus"], ["topo", "-p2p", "x"], ["--query-gpu=index"],
                                  ["--query-gpu=index", "--format=json"]])
def test_unknown_arguments_fail_on_stderr(args):
    proc = standin(*args)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.strip()


def test_missing_profile_and_missing_file(tmp_path):
    gone = standin("-L", profile_dir=str(tmp_path / "nope"))
    assert gone.returncode == 9 and "no GPU profile at" in gone.stderr
    partial = tmp_path / "partial"
    shutil.copytree(os.path.join(PROFILES, EIGHT), str(partial))
    os.remove(str(partial / "topo-m.txt"))
    broken = standin("topo", "-m", profile_dir=str(partial))
    assert broken.returncode == 3 and "has no topo-m.txt" in broken.stderr


def load_standin():
    loader = importlib.machinery.SourceFileLoader("nvidia_smi_standin", STANDIN)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_profile_resolution_order(tmp_path, monkeypatch):
    """$NVIDIA_SMI_STANDIN_PROFILE_DIR, else the path written in the pointer file, else the default folder."""
    module = load_standin()
    monkeypatch.setattr(module, "POINTER", str(tmp_path / "profile"))
    monkeypatch.setattr(module, "DEFAULT", str(tmp_path / "current"))
    monkeypatch.delenv(module.ENV, raising=False)
    assert module.profile_dir() == str(tmp_path / "current")
    (tmp_path / "profile").write_text(os.path.join(PROFILES, "rtxpro6000-2x-pcie") + "\n")
    assert module.profile_dir() == os.path.join(PROFILES, "rtxpro6000-2x-pcie")
    assert module.dispatch(["topo", "-m"]) == profile("rtxpro6000-2x-pcie", "topo-m.txt").encode()
    monkeypatch.setenv(module.ENV, os.path.join(PROFILES, EIGHT))
    assert module.profile_dir() == os.path.join(PROFILES, EIGHT)
