"""The GPU probes' code paths that need no GPU, and the evidence they recorded on a real 2x H200 machine.

tests/fixtures/device/h200x2_fusion_canary.json and h200x2_fusion_probes.json were written by
scripts/device/fusion_probes_evidence.sh on 2x NVIDIA H200 (SM90, NVLink), flashinfer-python 0.6.18, torch 2.11,
NCCL 2.28.9 (README: "GPU probes").
"""
import json
import os
import subprocess
import sys

import pytest
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICE = os.path.join(REPO, "tests", "fixtures", "device")


canary = load_file("roles/sglang_allreduce/files/allreduce_canary.py", "fusion_canary")
bench = load_file("roles/sglang_allreduce/files/allreduce_bench.py", "allreduce_bench")
CANARY = json.load(open(os.path.join(DEVICE, "h200x2_fusion_canary.json")))
PROBES = json.load(open(os.path.join(DEVICE, "h200x2_fusion_probes.json")))["results"]


def test_canary_arguments():
    args = canary.parse_args(["--out", "x.json", "--tokens", "64, 1,8,8", "--hidden", "4096"])
    assert args.tokens == [1, 8, 64] and args.hidden == 4096 and args.atol == 2 ** -5
    for bad in (["--tokens", "a,b"], ["--tokens", "0"], ["--hidden", "7170"], []):
        with pytest.raises(SystemExit):
            canary.parse_args(bad + (["--out", "x"] if bad else []))


def test_canary_imports_without_torch():
    proc = subprocess.run([sys.executable, "-c", "import importlib.util,sys; s=importlib.util.spec_from_file_location("
                           "'c', sys.argv[1]); m=importlib.util.module_from_spec(s); s.loader.exec_module(m); "
                           "print('torch' in sys.modules)", os.path.join(REPO, "roles/sglang_allreduce/files/allreduce_canary.py")],
                          capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"


def test_judge_passes_only_with_no_element_outside_tolerance():
    good = [{"tokens": 1, "max_abs_err_norm": 0.0156, "max_abs_err_residual": 0.0, "bad_elements": 0}]
    bad = good + [{"tokens": 8, "max_abs_err_norm": 14.6, "max_abs_err_residual": 100.0, "bad_elements": 1}]
    assert canary.judge(good)["passed"]
    verdict = canary.judge(bad)
    assert not verdict["passed"] and verdict["failed_tokens"] == [8] and verdict["max_abs_err"] == 100.0
    assert not canary.judge([])["passed"]


def test_recorded_canary_passed_with_the_fused_kernel_faster_at_every_size():
    assert CANARY["passed"] and CANARY["gpu"] == "NVIDIA H200" and CANARY["world_size"] == 2
    assert CANARY["flashinfer"] == "0.6.18" and CANARY["backend"] == "trtllm"
    assert [s["tokens"] for s in CANARY["sizes"]] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert CANARY["max_abs_err"] <= CANARY["tolerance"]["atol"]
    assert all(s["fused_us"] < s["reference_us"] for s in CANARY["sizes"])
    assert CANARY["first_call_s"] > 60  # the JIT build of trtllm_comm, on a fresh machine
    assert canary.judge(CANARY["sizes"])["passed"]


@pytest.mark.parametrize("run", ["canary_corrupt", "canary_wrong_reference"])
def test_recorded_canary_can_fail(run):
    result = PROBES[run]
    assert not result["passed"] and result["failed_tokens"] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert result["max_abs_err"] > 0.5
    assert not canary.judge(result["sizes"])["passed"]
    assert "FAILED" in canary.summary_line(result)


def test_recorded_warm_canary_passes_again():
    assert PROBES["canary_warm"]["passed"]


def test_recorded_allreduce_figures_show_what_p2p_buys():
    defaults = {s["tokens"]: s["us"] for s in PROBES["bench_defaults"]["sizes"]}
    no_p2p = {s["tokens"]: s["us"] for s in PROBES["bench_p2p_disabled"]["sizes"]}
    assert set(defaults) == set(no_p2p) == {1, 2, 4, 8, 16, 32, 64, 128}
    assert all(no_p2p[t] > defaults[t] for t in defaults)
    assert PROBES["bench_defaults"]["nccl_env"] == {}
    assert PROBES["bench_p2p_disabled"]["nccl_env"] == {"NCCL_P2P_DISABLE": "1"}


def test_bench_arguments_and_table():
    assert bench.parse_args(["--out", "x", "--tokens", "8,1"]).tokens == [1, 8]
    with pytest.raises(SystemExit):
        bench.parse_args(["--out", "x", "--tokens", "-1"])
    text = bench.table([PROBES["bench_defaults"], PROBES["bench_p2p_disabled"]])
    lines = text.splitlines()
    assert lines[0] == "| tokens | bytes | defaults, us | NCCL_P2P_DISABLE=1, us |"
    assert lines[2].startswith("| 1 | 14336 | ")
    assert len(lines) == 2 + 8


def test_replay_stand_in_writes_the_recorded_result(tmp_path):
    here = tmp_path / "etc"
    here.mkdir()
    (here / "pass.json").write_text(json.dumps(CANARY))
    (here / "fail.json").write_text(json.dumps(PROBES["canary_corrupt"]))
    script = open(os.path.join(REPO, "lab/standins/fusion-canary-replay")).read().replace(
        'HERE = "/etc/fusion-canary-replay"', "HERE = %r" % str(here))
    standin = tmp_path / "replay"
    standin.write_text(script)
    out = tmp_path / "out.json"
    ok = subprocess.run([sys.executable, str(standin), "--hidden", "7168", "--out", str(out)], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and "stand-in" in ok.stdout and json.loads(out.read_text())["passed"]
    (here / "mode").write_text("fail\n")
    failed = subprocess.run([sys.executable, str(standin), "--out", str(out)], capture_output=True, text=True)
    assert failed.returncode == 3 and not json.loads(out.read_text())["passed"]
    assert subprocess.run([sys.executable, str(standin)], capture_output=True).returncode == 2
    (here / "mode").write_text("crash\n")
    out.unlink()
    crashed = subprocess.run([sys.executable, str(standin), "--out", str(out)], capture_output=True, text=True)
    assert crashed.returncode == 1 and "no result written" in crashed.stderr and not out.exists()
    (here / "mode").write_text("pass\n")
    pcie = subprocess.run([sys.executable, str(standin), "--path", "pcie_ipc", "--out", str(out)], capture_output=True,
                          text=True)  # nothing recorded on real GPUs for it: no invented result
    assert pcie.returncode == 2 and "no recorded result for --path pcie_ipc" in pcie.stderr and not out.exists()


def test_bench_table_gains_a_pcie_ipc_column_only_where_measured():
    measured = {"label": "deployed", "sizes": [{"tokens": 1, "bytes": 14336, "us": 12.5, "pcie_ipc_us": 5.25},
                                               {"tokens": 4096, "bytes": 58720256, "us": 900.0, "pcie_ipc_us": None}]}
    text = bench.table([measured, PROBES["bench_defaults"]])
    lines = text.splitlines()
    assert lines[0] == "| tokens | bytes | deployed, us | deployed pcie_ipc, us | defaults, us |"
    assert lines[2].startswith("| 1 | 14336 | 12.50 | 5.25 | ")
    assert lines[-1] == "| 4096 | 58720256 | 900.00 | - | - |"  # outside the workspace: SGLang uses NCCL there
    args = bench.parse_args(["--out", "x"])
    assert args.pcie_ipc == "auto" and not args.no_pcie_ipc_tune
