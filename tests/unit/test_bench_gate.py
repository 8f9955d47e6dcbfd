"""The benchmark gate's arithmetic (module_utils/bench_gate.py): counting runs, medians, verdicts, correctness."""
import json

import pytest

from ansible.module_utils import bench_gate as bg


def run(rate, repeat=1, completed=4, concurrency=1, **extra):
    result = {"completed": completed, "output_throughput": rate, "median_ttft_ms": 12.0, "median_tpot_ms": 8.0,
              "accept_length": 2.0}
    result.update(extra)
    return {"concurrency": concurrency, "repeat": repeat, "rc": 0, "result": result, "error": None}


def test_parse_result_lines_reads_appended_objects_and_rejects_garbage():
    text = json.dumps({"completed": 4}) + "\n\n" + json.dumps({"completed": 3}) + "\n"
    assert [r["completed"] for r in bg.parse_result_lines(text)] == [4, 3]
    with pytest.raises(bg.GateInputError, match="line 2"):
        bg.parse_result_lines('{"a": 1}\nnot json\n')


def test_a_run_counts_only_when_every_request_completed():
    assert bg.run_problem(run(100.0), 4) is None
    assert bg.run_problem(run(100.0, completed=3), 4) == "completed 3 of 4 requests"
    assert "exit code 1" in bg.run_problem({"rc": 1, "result": None, "error": None}, 4)
    assert bg.run_problem({"rc": 1, "result": None, "error": "client exit code 1: boom"}, 4) == "client exit code 1: boom"


def test_summary_takes_the_median_of_counted_runs_and_the_spread():
    summary = bg.summarize([run(90.0, 1), run(110.0, 2), run(100.0, 3), run(500.0, 4, completed=2)], 4)
    s = summary[1]
    assert (s["runs"], s["counted"]) == (4, 3)
    assert s["median_output_tok_s"] == 100.0
    assert s["spread_pct"] == pytest.approx(20.0)
    assert s["problems"] == ["run 4: completed 2 of 4 requests"]


def test_faster_than_the_bar_passes_and_slower_fails_with_the_numbers():
    summary = bg.summarize([run(120.0, i) for i in (1, 2, 3)], 4)
    verdict = bg.judge(summary, 1, 100.0, 5.0)
    assert verdict["passed"] and verdict["bar_tok_s"] == pytest.approx(105.0)
    slow = bg.summarize([run(101.0, i) for i in (1, 2, 3)], 4)
    verdict = bg.judge(slow, 1, 100.0, 5.0)
    assert not verdict["passed"]
    message = bg.describe("h1", verdict, slow, "static")
    for number in ("101.0", "105.0", "100.0", "5.0", "12.0", "8.00", "2.00"):
        assert number in message


def test_one_incomplete_run_fails_the_gate_even_when_the_median_is_fast():
    summary = bg.summarize([run(200.0, 1), run(200.0, 2), run(200.0, 3, completed=1)], 4)
    verdict = bg.judge(summary, 1, 100.0, 5.0)
    assert not verdict["passed"]
    assert verdict["failures"][0].startswith("incomplete: 1 of 3 runs")


def test_wrong_completions_fail_a_fast_run():
    reference = [{"prompt": "p", "output_ids": [1, 2, 3, 4]}]
    wrong = [{"prompt": "p", "output_ids": [9, 9, 9, 9]}]
    correctness = bg.compare_completions(reference, wrong)
    assert correctness["match_rate"] == 0.0
    verdict = bg.judge(bg.summarize([run(300.0)], 4), 1, 100.0, 5.0, correctness, 0.75)
    assert not verdict["passed"] and verdict["failures"][-1].startswith("correctness")


def test_token_match_counts_positions_over_the_longer_completion():
    assert bg.token_match([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert bg.token_match([1, 2, 3, 4], [1, 2]) == 0.5
    assert bg.token_match([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75
    assert bg.token_match([], []) == 1.0


def test_text_is_compared_word_by_word_when_the_server_gives_no_ids():
    result = bg.compare_completions([{"prompt": "p", "text": " a b c d"}], [{"prompt": "p", "text": " a b x d"}])
    assert result["match_rate"] == 0.75


def test_an_unknown_prompt_is_an_input_error_not_a_verdict():
    with pytest.raises(bg.GateInputError, match="record the baseline again"):
        bg.compare_completions([{"prompt": "a", "text": "x"}], [{"prompt": "b", "text": "x"}])


def test_the_gated_concurrency_must_have_been_measured():
    with pytest.raises(bg.GateInputError, match="concurrency 4"):
        bg.judge(bg.summarize([run(100.0)], 4), 4, 100.0, 5.0)
