"""`auto` by measurement against the SGLang STAND-IN, measured by SGLang's REAL benchmark client.

One stand-in configuration gives each all-reduce path its own speed (allreduce_paths); the server is started on
each candidate the way the gate's trials start it (the fusion flag or not, at TP 2), measured by bench_runner.py
with speculation on, judged against the plain baseline (test_benchmark_gate's reference: the same stand-in without
speculation), and module_utils/allreduce_choice.py picks the path. The lab's candidates (sglang 0.5.21 / FlashInfer
0.6.18): fusion and nccl.
"""
from ansible.module_utils import allreduce_choice as ac
from tests.integration.test_benchmark_gate import SPEC, measure, reference, verdict  # noqa: F401 (fixture)

CANDIDATES = ["fusion", "nccl"]
FLAGS = {"fusion": ["--tp-size", "2", "--flashinfer-allreduce-fusion-backend", "trtllm"], "nccl": ["--tp-size", "2"]}


def trials(tmp_path, reference, paths, repeats=3):  # noqa: F811 (the fixture's value)
    rows = []
    for path in CANDIDATES:
        folder = tmp_path / path
        folder.mkdir()
        measured = measure(folder, {"allreduce_paths": paths}, args=SPEC + FLAGS[path], repeats=repeats)
        result, message, _ = verdict(measured, reference)
        print("\n%s: %s" % (path, message))
        rows.append({"path": path, "passed": result["passed"], "failures": result["failures"],
                     "median_tok_s": result["median_tok_s"], "bar_tok_s": result["bar_tok_s"],
                     "baseline_tok_s": result["baseline_tok_s"], "match_rate": None})
    return ac.choose(rows, CANDIDATES)


def test_auto_picks_the_path_the_server_makes_fastest(tmp_path, reference):  # noqa: F811
    choice = trials(tmp_path, reference, {"fusion": {"tokens_per_s": 115}, "nccl": {"tokens_per_s": 160}})
    assert choice["winner"] == "nccl", choice["why"]
    data, problem = ac.parse(ac.record(choice, CANDIDATES, "2026-12-01T06:30:00+00:00"))
    assert ac.recorded_path(data, problem, CANDIDATES)[0] == "nccl"  # the next deploy renders it


def test_auto_rejects_a_fast_path_with_wrong_outputs(tmp_path, reference):  # noqa: F811
    choice = trials(tmp_path, reference, {"fusion": {"tokens_per_s": 250, "wrong_output": True},
                                          "nccl": {"tokens_per_s": 130}}, repeats=1)
    assert choice["winner"] == "nccl", choice["why"]
    assert "rejected: fusion" in choice["why"] and "correctness" in choice["why"]


def test_no_path_over_the_bar_is_no_winner(tmp_path, reference):  # noqa: F811
    choice = trials(tmp_path, reference, {"fusion": {"tokens_per_s": 60}, "nccl": {"tokens_per_s": 50}}, repeats=1)
    assert choice["winner"] is None and "throughput" in choice["why"]
