"""scripts/device/start_timeline.py on real start-ups (the shared-GPU capture's server logs) and on cache folders
written here: where a start's time went, and which compile caches it filled."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts", "device"))
import start_timeline  # noqa: E402  pylint: disable=wrong-import-position

CAPTURE = os.path.join(REPO, "tests", "fixtures", "device", "h100x1_shared2_deepseek_v3_capture")


def capture_lines(name):
    with open(os.path.join(CAPTURE, "server-%s.log" % name), encoding="utf-8") as handle:
        return handle.read().splitlines()


def test_a_start_that_built_the_fused_kernel_spent_its_time_before_the_fusion_workspace():
    spans = start_timeline.phases(capture_lines("spec_fusion_mla_draft"))
    longest = max(spans, key=lambda span: span["seconds"])
    assert (longest["from"], longest["to"]) == ("kv_cache_allocated", "fusion_workspace_ready")
    assert longest["seconds"] > 300  # 13:38:37 -> 13:44:02 in that log


def test_a_later_start_of_the_same_unit_spent_its_time_capturing_cuda_graphs():
    spans = {(span["from"], span["to"]): span["seconds"]
             for span in start_timeline.phases(capture_lines("spec_fusion"))}
    assert spans[("kv_cache_allocated", "fusion_workspace_ready")] == 0
    assert spans[("cuda_graphs_capturing", "cuda_graphs_captured")] == 37
    assert max(spans.values()) == 37


def test_phases_follow_the_log_order_and_an_unfused_start_has_no_fusion_marker():
    found = start_timeline.markers(capture_lines("control"))
    assert "fusion_workspace_ready" not in found
    spans = start_timeline.phases(capture_lines("control"))
    assert [span["from"] for span in spans][:3] == ["arguments_parsed", "distributed_init", "weights_loading"]
    assert all(span["seconds"] >= 0 for span in spans)


def test_a_log_without_timestamps_has_no_phases():
    assert start_timeline.phases(["Traceback (most recent call last):", "boom"]) == []


@pytest.mark.parametrize("path, kind", [
    ("/var/lib/sglang/.triton/cache/AB12/_fwd_kernel.cubin", "triton"),
    ("/var/lib/sglang/flashinfer/.cache/flashinfer/0.6.18/90a/cached_ops/norm/norm.so", "flashinfer_jit"),
    ("/tmp/torchinductor_sglang/ab/c.py", "inductor"),
    ("/var/lib/sglang/.cache/deep_gemm/kernel.cubin", "deep_gemm"),
    ("/var/lib/sglang/api.log", "other"),
])
def test_cache_kind_by_folder(path, kind):
    assert start_timeline.cache_kind(path) == kind


def test_growth_counts_only_what_the_start_wrote(tmp_path):
    home = tmp_path / "home"
    (home / ".triton" / "cache" / "k1").mkdir(parents=True)
    old = home / ".triton" / "cache" / "k1" / "old.cubin"
    old.write_bytes(b"x" * 10)
    os.utime(old, (1000, 1000))
    link = home / "link-out"
    link.symlink_to("/etc/passwd")  # a link is not followed, nor counted
    before = start_timeline.snapshot([str(home), str(tmp_path / "missing")])
    assert list(before) == [str(old)]
    (home / ".triton" / "cache" / "k2").mkdir()
    new = home / ".triton" / "cache" / "k2" / "new.cubin"
    new.write_bytes(b"y" * 7)
    os.utime(new, (1030, 1030))
    (home / "flashinfer").mkdir()
    jit = home / "flashinfer" / "norm.so"
    jit.write_bytes(b"z" * 5)
    os.utime(jit, (1100, 1100))
    grown = start_timeline.growth(before, start_timeline.snapshot([str(home)]), started_at=1000)
    assert grown == {"triton": {"files": 1, "bytes": 7, "first_s": 30.0, "last_s": 30.0},
                     "flashinfer_jit": {"files": 1, "bytes": 5, "first_s": 100.0, "last_s": 100.0}}
