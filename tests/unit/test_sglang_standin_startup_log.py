"""The start-up log: the stand-in's own first line, SGLang's and uvicorn's line formats, and the FlashInfer
allreduce-fusion lines (the ones sglang_server's fusion proof reads) in each variant."""
import os
import re
import subprocess
import sys

import pytest

from tests.helpers.sglang_standin import FUSION, SCRIPT, STAMP


def test_says_it_is_a_stand_in(standin):
    server = standin().start()
    first = server.output().splitlines()[0]
    assert re.match(STAMP % "" + "sglang STAND-IN: this is a stand-in for sglang.launch_server", first), first
    assert "NOT SGLang" in first and server.config_path in first
    proc = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, check=False,
                          env=dict(os.environ, SGLANG_STANDIN_CONFIG="/nonexistent"))
    assert proc.returncode == 0 and "STAND-IN" in proc.stdout and "NOT SGLang" in proc.stdout
    with open(SCRIPT, encoding="utf-8") as handle:
        assert "STAND-IN" in handle.read(400)


def test_uvicorn_and_sglang_line_formats(standin):
    server = standin().start().wait_ready()
    out = server.output()
    assert re.search(STAMP % "" + r"INFO:     Started server process \[%d\]\n" % server.proc.pid, out)
    assert re.search(STAMP % "" + r"INFO:     Uvicorn running on http://127\.0\.0\.1:%d \(Press CTRL\+C to quit\)"
                     % server.port, out)
    assert re.search(STAMP % "" + r"INFO:     127\.0\.0\.1:\d+ - \"POST /generate HTTP/1\.1\" 200 OK", out)
    assert re.search(STAMP % "" + r"Load weight begin\. avail mem=\d+\.\d\d GB", out)
    assert re.search(STAMP % "" + r"server_args=\{'model_path': '/srv/models/kimi-k2.5-standin'", out)


# ------------------------------------------------------------------------------------------- fusion lines

ENABLED = ("FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm, rank=%d, world_size=2, "
           "max_token_num=2048, hidden_dim=7168")
SKIPPED = ("FlashInfer workspace preflight probe failed (cuMulticastGetGranularity failed for FlashInfer workspace "
           "preflight: <CUresult.CUDA_ERROR_NOT_SUPPORTED: 801>). Skipping allreduce fusion.")
VOTED = ("FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank. Skipping allreduce fusion "
         "to avoid cross-rank desync inside the flashinfer collective.")
DISABLED = ("Failed to initialize FlashInfer workspace (backend=trtllm): CUDA error: peer access is not supported "
            "between these two devices. Disabling flashinfer allreduce fusion permanently.")


def fusion_lines(out):
    return [line for line in out.splitlines() if "FlashInfer" in line and "server_args=" not in line]


@pytest.mark.parametrize("variant, expected", [
    (None, [(0, ENABLED % 0), (0, ENABLED % 0), (1, ENABLED % 1), (1, ENABLED % 1)]),  # two workspaces per rank
    ("enabled", [(0, ENABLED % 0), (0, ENABLED % 0), (1, ENABLED % 1), (1, ENABLED % 1)]),
    ("skipped", [(0, SKIPPED), (0, VOTED), (1, SKIPPED), (1, VOTED)]),
    ("disabled", [(0, DISABLED), (1, DISABLED)]),
    ("none", []),
])
def test_fusion_log_variants(standin, variant, expected):
    server = standin({"fusion_log": variant} if variant else {}, ["--tp-size", "2"] + FUSION).start()
    lines = fusion_lines(server.output())
    print("\n".join(lines))
    assert len(lines) == len(expected), lines
    for line, (rank, text) in zip(lines, expected):
        assert re.match(STAMP % (" TP%d" % rank) + re.escape(text) + "$", line), (line, text)
    assert server.output().index("Load weight end") < server.output().index("Uvicorn running")


def test_fusion_lines_need_a_flag_and_more_than_one_rank(standin):
    assert fusion_lines(standin(args=["--tp-size", "2"]).start().output()) == []  # no flag: nothing
    assert fusion_lines(standin(args=FUSION).start().output()) == []  # TP 1: world_size <= 1, nothing logged


def test_the_off_switch_is_accepted_and_keeps_fusion_off(standin):
    """0.5.21's --enforce-disable-flashinfer-allreduce-fusion (arg_groups/fields/exec_.py): no fusion, whatever else
    the command line says (overrides.py's _enforce_disable_allreduce_fusion runs after every other resolution)."""
    server = standin(args=["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"] + FUSION).start()
    assert fusion_lines(server.output()) == []
    info = server.wait_ready().request("/server_info")[1]
    assert info["flashinfer_allreduce_fusion_backend"] is None
    assert info["enforce_disable_flashinfer_allreduce_fusion"] is True


def test_fusion_deprecated_flag_and_custom_error(standin):
    server = standin({"fusion_log": "skipped", "fusion_error": "boom"},
                     ["--tp", "2", "--enable-flashinfer-allreduce-fusion"]).start()
    out = server.output()
    assert "--enable-flashinfer-allreduce-fusion is deprecated. Please use --flashinfer-allreduce-fusion-backend=auto " \
           "instead." in out
    assert "FlashInfer workspace preflight probe failed (boom). Skipping allreduce fusion." in out
    assert server.request("/server_info")[1]["flashinfer_allreduce_fusion_backend"] == "auto"


def test_fusion_refused_crashes_at_start(standin):
    server = standin({"fusion_log": "refused"}, ["--tp-size", "2"] + FUSION).start(wait_for=None)
    assert server.exit_code() == 1
    out = server.output()
    assert "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs." in out
    assert "Uvicorn running" not in out


def test_fusion_trtllm_is_single_node_only(standin):
    server = standin(args=["--tp-size", "4", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr",
                           "10.0.0.1:50000"] + FUSION).start(wait_for=None)
    assert server.exit_code() == 1
    assert "ValueError: FlashInfer allreduce fusion trtllm backend supports single-node only." in server.output()
