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


# ------------------------------------------------------------------------------ no number is trusted unchecked

NAN, INF = float("nan"), float("inf")
HUGE = 10 ** 400  # an int no float holds: float() of it raises OverflowError


@pytest.mark.parametrize("rate,why", [
    (NAN, "nan (not a finite number)"), (INF, "inf (not a finite number)"), (-INF, "-inf (not a finite number)"),
    (0, "0 (not above 0)"), (-5.0, "-5.0 (not above 0)"), (True, "True (a boolean, not a number)"),
    ("120", "'120' (not a number)"), (HUGE, "1000000000000000000000000000000000000... (not a finite number)"),
])
def test_a_throughput_that_is_not_a_finite_rate_does_not_count(rate, why):
    assert bg.run_problem(run(rate), 4) == "output_throughput is %s: a rate must be a finite number above 0" % why
    summary = bg.summarize([run(rate, 1), run(rate, 2), run(rate, 3)], 4)
    assert summary[1]["counted"] == 0 and summary[1]["median_output_tok_s"] is None
    verdict = bg.judge(summary, 1, 100.0, 5.0)
    assert not verdict["passed"]
    assert verdict["failures"][-1] == "throughput: no counted run at concurrency 1"
    assert "FAILED" in bg.describe("h1", verdict, summary, "static")  # formats, no OverflowError


def test_one_nan_run_among_good_ones_fails_as_incomplete_and_is_left_out_of_the_median():
    summary = bg.summarize([run(120.0, 1), run(NAN, 2), run(130.0, 3)], 4)
    assert summary[1]["counted"] == 2 and summary[1]["median_output_tok_s"] == 125.0
    verdict = bg.judge(summary, 1, 100.0, 5.0)
    assert not verdict["passed"] and verdict["failures"] == [
        "incomplete: 1 of 3 runs at concurrency 1 did not count (run 2: output_throughput is nan (not a finite "
        "number): a rate must be a finite number above 0)"]


@pytest.mark.parametrize("completed,why", [
    (True, "completed True is not a count of requests"),  # JSON true == 1 in Python: not one request
    (False, "completed False is not a count of requests"),
    ("1", "completed '1' is not a count of requests"),
    (NAN, "completed nan is not a count of requests"),
    (INF, "completed inf is not a count of requests"),
    (HUGE, "completed 1000000000000000000000000000000000000... is not a count of requests"),
    (1.5, "completed 1.5 is not a count of requests"),
])
def test_completed_must_be_a_whole_number_not_a_boolean(completed, why):
    assert bg.run_problem(run(120.0, completed=completed), 1) == why
    assert bg.run_problem(run(120.0, completed=1.0), 1) is None  # 1.0 is one request


@pytest.mark.parametrize("baseline", [NAN, INF, -INF, 0, 0.0, -80.0, True, "85", None, HUGE])
def test_a_baseline_that_is_not_a_finite_rate_lets_no_run_pass(baseline):
    summary = bg.summarize([run(1e6, i) for i in (1, 2, 3)], 4)
    with pytest.raises(bg.GateInputError, match="the baseline is .*: a rate must be a finite number above 0"):
        bg.judge(summary, 1, baseline, 5.0)


@pytest.mark.parametrize("margin", [NAN, INF, -1.0, True, None])
def test_a_margin_that_is_not_a_finite_number_from_0_judges_nothing(margin):
    with pytest.raises(bg.GateInputError, match="the margin is"):
        bg.judge(bg.summarize([run(120.0)], 4), 1, 100.0, margin)


def test_a_bar_too_large_for_a_float_is_refused_not_infinite():
    with pytest.raises(bg.GateInputError, match="is not a finite number"):
        bg.judge(bg.summarize([run(120.0)], 4), 1, 1e308, 100.0)


def test_a_nan_median_handed_to_judge_fails_it():
    summary = bg.summarize([run(120.0)], 4)
    summary[1]["median_output_tok_s"] = NAN
    assert not bg.judge(summary, 1, 100.0, 5.0)["passed"]


def test_huge_but_finite_rates_give_a_finite_median_and_no_infinite_spread():
    summary = bg.summarize([run(1e308, 1), run(1.5e308, 2)], 4)
    assert summary[1]["median_output_tok_s"] == pytest.approx(1.25e308)  # not (a + b) / 2 = inf
    assert summary[1]["spread_pct"] == pytest.approx(40.0)
    spread = bg.summarize([run(1e-300, 1), run(1e-300, 2), run(1e300, 3)], 4)[1]["spread_pct"]
    assert spread is None  # 1e602 % overflows: no number a report can hold


@pytest.mark.parametrize("value", [INF, NAN, "1e999", HUGE, True, -1, 2.5, "x", None])
def test_count_refuses_what_is_not_a_whole_number_without_overflow(value):
    with pytest.raises(bg.GateInputError, match="must be a whole number"):
        bg.count(value, "settings.num_prompts")
    assert bg.count("8", "n") == 8 and bg.count(8.0, "n") == 8


def test_latency_medians_leave_out_what_is_not_finite():
    summary = bg.summarize([run(120.0, 1, median_ttft_ms=NAN), run(120.0, 2, median_ttft_ms=HUGE),
                            run(120.0, 3, median_ttft_ms=10.0)], 4)
    assert summary[1]["median_ttft_ms"] == 10.0


@pytest.mark.parametrize("recorded,shown", [
    ({"median_output_tok_s": NAN}, "nan (not a finite number)"),
    ({"median_output_tok_s": INF}, "inf (not a finite number)"),
    ({"median_output_tok_s": 0}, "0 (not above 0)"),
    ({"median_output_tok_s": -85.0}, "-85.0 (not above 0)"),
    ({"median_output_tok_s": True}, "True (a boolean, not a number)"),
    ({"median_output_tok_s": "85"}, "'85' (not a number)"),
    ({}, "None (not a number)"),
])
def test_a_recorded_baseline_without_a_usable_throughput_is_refused_naming_the_file_and_field(recorded, shown):
    with pytest.raises(bg.GateInputError) as err:
        bg.recorded_tok_s(recorded, "/r/baselines/h1.json")
    message = str(err.value)
    assert message.startswith("the baseline file /r/baselines/h1.json cannot judge any run: its median_output_tok_s "
                              "is %s: a rate must be a finite number above 0." % shown)
    assert "Delete it, or record a new baseline" in message and "sglang_benchmark_record_baseline=true" in message
    assert bg.recorded_tok_s({"median_output_tok_s": 85}, "f") == 85.0
    with pytest.raises(bg.GateInputError, match="holds no JSON object"):
        bg.recorded_tok_s([85.0], "f")


@pytest.mark.parametrize("kwargs,words", [
    ({"margin_pct": NAN}, "margin_pct must be a finite number, 0 or more (got nan)"),
    ({"margin_pct": INF}, "margin_pct must be a finite number, 0 or more (got inf)"),
    ({"baseline_tok_s": NAN}, "baseline_tok_s is nan (not a finite number)"),
    ({"baseline_tok_s": INF}, "baseline_tok_s is inf (not a finite number)"),
    ({"baseline_tok_s": 0.0}, "baseline_tok_s is 0.0 (not above 0)"),
    ({"baseline_tok_s": True}, "baseline_tok_s is True (a boolean, not a number)"),
    ({"gate_concurrency": True}, "gate_concurrency must be a whole number, 1 or more (got True)"),
    ({"min_match_rate": NAN}, "min_match_rate must be from 0 to 1 (got nan)"),
    ({"tie_max_gap": INF}, "tie_max_gap must be from 0 to 0.5 (got inf)"),
])
def test_the_gates_own_parameters_must_be_finite(kwargs, words):
    args = dict({"host": "h", "margin_pct": 5.0, "gate_concurrency": 1, "min_match_rate": 0.75}, **kwargs)
    assert [p for p in bg.input_problems(**args) if words in p], bg.input_problems(**args)
    assert bg.input_problems("h", 5.0, 1, 0.75, 85.0) == []


def test_a_logprob_too_large_for_a_float_is_left_out_not_an_overflow():
    assert bg.top_at([[[5, HUGE], [6, -0.5], [7, NAN]]], 0) == {6: -0.5}
