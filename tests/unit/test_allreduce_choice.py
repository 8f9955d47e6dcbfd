"""`auto` by measurement: the fastest correct path wins, and its record holds while the candidates are the same."""
import json

import pytest

from ansible.module_utils import allreduce_choice as ac

CANDIDATES = ["fusion", "nccl"]


def row(path, median, passed=True, failures=None, match=1.0, bar=105.0):
    return {"path": path, "passed": passed, "median_tok_s": median, "bar_tok_s": bar, "baseline_tok_s": 100.0,
            "match_rate": match, "failures": failures or []}


def test_the_fastest_path_that_passed_wins_and_the_why_names_every_path():
    choice = ac.choose([row("fusion", 150.0), row("nccl", 130.0)], CANDIDATES)
    assert choice["winner"] == "fusion"
    assert "fusion is the fastest correct path (150.0 tok/s" in choice["why"] and "nccl 130.0 tok/s" in choice["why"]


def test_a_fast_path_with_wrong_outputs_is_rejected_and_named():
    wrong = row("fusion", 300.0, passed=False, match=0.1,
                failures=["correctness: greedy completions match the baseline's 10.0 % < 75.0 % required"])
    choice = ac.choose([wrong, row("nccl", 130.0)], CANDIDATES)
    assert choice["winner"] == "nccl"
    assert "rejected: fusion 300.0 tok/s, match 10 % (correctness" in choice["why"]


def test_no_path_over_the_bar_is_no_winner_and_says_why():
    slow = ["throughput: median 101.0 tok/s < 105.0 tok/s required"]
    choice = ac.choose([row("fusion", 101.0, passed=False, failures=slow), row("nccl", 99.0, passed=False,
                                                                              failures=["throughput: low"])],
                       CANDIDATES)
    assert choice["winner"] is None and choice["why"].startswith("no path is correct and faster")
    with pytest.raises(ac.ChoiceError, match="no winner"):
        ac.record(choice, CANDIDATES, "now")


def test_a_tie_keeps_the_path_listed_first():
    assert ac.choose([row("nccl", 140.0), row("fusion", 140.0)], CANDIDATES)["winner"] == "fusion"
    assert ac.choose([row("nccl", 140.0), row("fusion", 140.0)], ["nccl", "fusion"])["winner"] == "nccl"


@pytest.mark.parametrize("rows,words", [
    ([row("fusion", 150.0)], "no measurement for candidate path(s) nccl"),
    ([row("fusion", 150.0), row("nccl", 1.0), row("pcie_ipc", 2.0)], "pcie_ipc is not a candidate"),
    ([row("fusion", 150.0), row("fusion", 1.0)], "judged twice"),
    ([row("fusion", None), row("nccl", 1.0)], "passed without a median"),
    ([dict(row("fusion", 150.0), passed="yes"), row("nccl", 1.0)], "passed must be true or false"),
    ([dict(row("fusion", 150.0), median_tok_s="fast"), row("nccl", 1.0)], "median_tok_s must be a finite number"),
    ("fusion", "rows must be a list"),
])
def test_bad_judgements_are_refused_with_their_reason(rows, words):
    with pytest.raises(ac.ChoiceError) as err:
        ac.choose(rows, CANDIDATES)
    assert words in str(err.value)


def test_the_record_is_read_back_while_the_candidates_are_the_same():
    choice = ac.choose([row("fusion", 120.0), row("nccl", 135.0)], CANDIDATES)
    data, problem = ac.parse(ac.record(choice, CANDIDATES, "2026-12-01T06:00:00+00:00"))
    assert problem is None and [r["path"] for r in data["paths"]] == CANDIDATES
    path, reason = ac.recorded_path(data, problem, ["nccl", "fusion"])
    assert path == "nccl" and "measured it fastest and correct on 2026-12-01T06:00:00+00:00" in reason


def test_other_candidates_mean_the_gate_decides_again():
    data, problem = ac.parse(ac.record(ac.choose([row("fusion", 150.0), row("nccl", 1.0)], CANDIDATES),
                                       CANDIDATES, "t"))
    path, reason = ac.recorded_path(data, problem, ["pcie_ipc", "fusion", "nccl"])
    assert path is None and "the candidates changed" in reason and "now pcie_ipc, fusion, nccl" in reason


@pytest.mark.parametrize("text,words", [
    (None, "no path measured yet"),
    ("{", "not JSON"),
    (json.dumps({"version": 9, "path": "nccl", "candidates": ["nccl"]}), "no version 1"),
    (json.dumps({"version": 1, "candidates": ["nccl"]}), "lacks its path"),
])
def test_an_absent_or_unusable_record_is_no_choice(text, words):
    data, problem = ac.parse(text)
    path, reason = ac.recorded_path(data, problem, ["nccl"])
    assert path is None and words in reason


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("bad,words", [
    (row("fusion", NAN), "row fusion: median_tok_s must be a finite number or null, got nan"),
    (row("fusion", INF), "row fusion: median_tok_s must be a finite number or null, got inf"),
    (row("fusion", NAN, passed=False), "row fusion: median_tok_s must be a finite number or null, got nan"),
    (row("fusion", True), "row fusion: median_tok_s must be a finite number or null, got True"),
    (row("fusion", 10 ** 400), "row fusion: median_tok_s must be a finite number or null, got 100000000000"),
    (row("fusion", 0.0), "row fusion passed with median_tok_s is 0.0 (not above 0)"),
    (row("fusion", -150.0), "row fusion passed with median_tok_s is -150.0 (not above 0)"),
    (row("fusion", 150.0, bar=NAN), "row fusion: bar_tok_s must be a finite number or null, got nan"),
    (row("fusion", 150.0, match=NAN), "row fusion: match_rate must be a finite number or null, got nan"),
    (row("fusion", 150.0, match=True), "row fusion: match_rate must be a finite number or null, got True"),
    (row("fusion", 150.0, match=1.5), "row fusion: match_rate must be from 0 to 1, got 1.5"),
])
def test_a_nan_or_otherwise_untrustworthy_figure_never_wins_the_choice(bad, words):
    """A NaN median compares false with everything, so max() could keep it whatever the other paths measured."""
    for rows in ([bad, row("nccl", 130.0)], [row("nccl", 130.0), bad]):
        with pytest.raises(ac.ChoiceError) as err:
            ac.choose(rows, CANDIDATES)
        assert words in str(err.value)


def test_a_record_with_version_true_is_no_choice():
    text = json.dumps({"version": True, "path": "nccl", "candidates": ["nccl"]})
    assert ac.recorded_path(*ac.parse(text), ["nccl"])[0] is None
    mixed = json.dumps({"version": 1, "path": "nccl", "candidates": ["nccl", 7]})
    assert "lacks its path or candidates" in ac.recorded_path(*ac.parse(mixed), ["nccl"])[1]


def test_nothing_non_finite_is_recorded():
    choice = ac.choose([row("fusion", 150.0), row("nccl", 130.0)], CANDIDATES)
    choice["paths"][1]["bar_tok_s"] = INF  # not through choose(): record() checks what it writes itself
    with pytest.raises(ac.ChoiceError, match="never recorded"):
        ac.record(choice, CANDIDATES, "t")
