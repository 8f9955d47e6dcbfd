"""scripts/device/greedy_ties.py: where two greedy legs part and whether the servers' logprobs show a tie there;
and the e2e script's glue that feeds it."""
import pytest

from ansible.module_utils import bench_gate as bg
from tests.helpers.script_module import load_file

ties = load_file("scripts/device/greedy_ties.py", "greedy_ties")
runner = load_file("roles/sglang_benchmark/files/bench_runner.py", "bench_runner_greedy_ties")
e2e = load_file("scripts/device/e2e_evidence.py", "e2e_evidence_ties")


def top(*pairs):
    """One position of SGLang's output_top_logprobs: [logprob, token id, text]."""
    return [[logprob, token, None] for token, logprob in pairs]


def test_equal_outputs_need_no_explanation():
    assert ties.explain([1, 2], [1, 2], [top((1, -1.0))], [top((1, -1.0))]) is None


def test_a_tie_in_both_legs_is_a_tie():
    # The shape of the 1x H200 run's mismatch: tokens 86 and 12 with equal logits where the legs part.
    plain_top = [top((10, -0.5)), top((70, -0.4)), top((68, -0.3)), top((86, -3.9), (12, -3.9))]
    leg_top = [top((10, -0.5)), top((70, -0.4)), top((68, -0.3)), top((12, -3.9), (86, -3.9001))]
    found = ties.explain([10, 70, 68, 86], [10, 70, 68, 12], plain_top, leg_top)
    assert found["position"] == 3 and (found["plain_token"], found["leg_token"]) == (86, 12)
    assert found["cause"] == "tie" and found["plain_gap"] == 0.0 and found["leg_gap"] == 0.0001
    assert found["plain_top"][0][1] == found["plain_top"][1][1] == -3.9


def test_a_gap_over_one_bf16_step_is_a_divergence():
    over = ties.TIE_BOUND * 1.5
    found = ties.explain([5], [6], [top((5, -1.0), (6, -1.0 - over))], [top((6, -1.0), (5, -1.0))])
    assert found["cause"] == "divergence" and found["plain_gap"] == round(over, 6)


def test_a_leg_token_outside_the_plain_legs_top_two_is_a_divergence():
    found = ties.explain([5, 1], [7, 1], [top((5, -0.1), (6, -2.0))], [top((7, -0.1), (5, -0.1))])
    assert found["cause"] == "divergence" and found["plain_gap"] is None


def test_without_logprobs_the_cause_is_unknown():
    assert ties.explain([5], [6], None, [top((6, -1.0), (5, -1.0))])["cause"] == "unknown"
    assert ties.explain([5], [6], [None], [top((6, -1.0), (5, -1.0))])["cause"] == "unknown"
    assert ties.explain([5, 1], [5], [top((5, -1.0))], [top((5, -1.0))])["cause"] == "unknown"  # past the end


def request(ids, *positions):
    """What one logprob request to a server returned (e2e_legs.greedy_logprobs)."""
    return {"status": 200, "output_ids": ids, "top_logprobs": list(positions)}


def test_mismatches_keep_the_prompt_order_and_skip_what_is_absent():
    prompts = ["a", "b", "c", "d"]
    plain = {"a": [1, 2], "b": [3, 4], "c": [5, 6]}
    leg = {"a": [1, 2], "b": [3, 9], "c": [7, 6], "d": [1]}
    plain_lp = {"b": request([3, 4], top((3, -1.0)), top((4, -1.0), (9, -1.0))),
                "c": request([5, 6], top((5, -1.0), (7, -3.0)))}
    leg_lp = {"b": request([3, 9], top((3, -1.0)), top((9, -1.0), (4, -1.0))),
              "c": request([7, 6], top((7, -1.0), (5, -1.0)))}
    found = ties.mismatches(prompts, plain, leg, plain_lp, leg_lp)
    assert [(f["prompt_index"], f["prompt"], f["cause"]) for f in found] == [(1, "b", "tie"), (2, "c", "divergence")]
    assert ties.summary(found) == {"tie": 1, "divergence": 1, "unknown": 0}


def test_logprobs_of_a_request_that_decoded_another_prefix_explain_nothing():
    # The plain server's logprob request took token 8 at position 0: its distribution at position 1 follows 8, not 3.
    plain_lp = {"a": request([8, 4], top((8, -1.0), (3, -1.0)), top((4, -1.0), (9, -1.0)))}
    leg_lp = {"a": request([3, 9], top((3, -1.0)), top((9, -1.0), (4, -1.0)))}
    found = ties.mismatches(["a"], {"a": [3, 4]}, {"a": [3, 9]}, plain_lp, leg_lp)
    assert found[0]["position"] == 1 and found[0]["cause"] == "unknown" and found[0]["plain_top"] == []


def test_a_server_that_broke_a_tie_the_other_way_when_asked_again():
    completions = {"a": [16, 11, 63, 8], "b": [1, 2], "c": [4, 5]}
    logprobs = {"a": request([16, 11, 58, 1], top((16, -2.6)), top((11, -2.5)), top((63, -2.9), (58, -2.9))),
                "b": request([1, 2]), "c": request([4, 7], top((4, -1.0)), top((5, -1.0), (7, -2.0)))}
    found = ties.repeats(["a", "b", "c"], completions, logprobs)
    assert [(f["prompt"], f["position"], f["plain_token"], f["leg_token"], f["cause"]) for f in found] == [
        ("a", 2, 63, 58, "tie"), ("c", 1, 5, 7, "divergence")]
    assert ties.repeats(["a"], completions, {"a": {"status": 500, "error": "boom"}}) == []


def test_gaps_say_how_near_a_tie_each_decision_was():
    assert ties.gaps([top((1, -0.5), (2, -0.75)), top((3, -1.0), (4, -1.0)), None, top((5, -0.1))]) == \
        [0.25, 0.0, None, None]
    assert ties.gaps(None) == [] and ties.gaps([]) == []


def test_a_missing_completion_counts_as_a_difference():
    found = ties.mismatches(["a"], {"a": [1]}, {"a": None}, {}, {})
    assert found[0]["position"] == 0 and found[0]["leg_token"] is None and found[0]["cause"] == "unknown"



def test_the_e2e_run_reads_each_legs_logprob_requests_and_completions():
    state = {"legs": {"plain": {"greedy_logprobs": {"a": request([1], top((1, -0.1))),
                                                    "b": {"status": 500, "error": "boom"}}}, "spec": {}}}
    assert e2e.logprob_requests(state, "plain")["a"]["output_ids"] == [1]
    assert e2e.logprob_requests(state, "spec") == {} and e2e.logprob_requests(state, "absent") == {}
    report = {"completions": [{"prompt": "a", "output_ids": [1]}, {"prompt": "b", "error": "timed out"}]}
    assert e2e.completions(report) == {"a": [1], "b": None}


@pytest.mark.parametrize("plain_pair,leg_pair", [
    (((5, -1.0), (6, -1.0)), ((6, -1.0), (5, -1.0))),                    # exact in both
    (((5, -1.0), (6, -1.0 - 2.0 ** -6)), ((6, -1.0), (5, -1.0))),         # one bf16 step in one
    (((5, -1.0), (6, -1.1)), ((6, -1.0), (5, -1.0))),                     # a clear best in one
    (((5, -1.0), (7, -1.0)), ((6, -1.0), (5, -1.0))),                     # the other token not in one's top two
    (((5, float("nan")), (6, float("nan"))), ((6, -1.0), (5, -1.0))),     # not numbers
])
def test_the_evidence_and_the_gate_call_the_same_partings_ties(plain_pair, leg_pair):
    """greedy_ties reads SGLang's answers with the gate's own conversion and rule: with the gate's bound set to
    TIE_BOUND, a parting is a tie for one exactly when it is for the other."""
    plain_top, leg_top = [top((1, -0.1)), top(*plain_pair)], [top((1, -0.1)), top(*leg_pair)]
    found = ties.explain([1, 5], [1, 6], plain_top, leg_top)
    gate = bg.tie_at({"output_ids": [1, 5], "top_logprobs": runner.top_logprobs(plain_top)},
                     {"output_ids": [1, 6], "top_logprobs": runner.top_logprobs(leg_top)}, ties.TIE_BOUND)
    assert (found["cause"] == "tie") == (gate == 1)
