"""The sglang_allreduce_choice module through real Ansible: the winner recorded, check mode, no winner, refusals."""
import json

import pytest

from tests.helpers.ansible_run import run_module

CANDIDATES = ["fusion", "nccl"]


def rows(fusion=150.0, nccl=130.0, fusion_passed=True):
    return [{"path": "fusion", "passed": fusion_passed, "median_tok_s": fusion, "bar_tok_s": 105.0,
             "failures": [] if fusion_passed else ["correctness: 10 % < 75 %"]},
            {"path": "nccl", "passed": True, "median_tok_s": nccl, "bar_tok_s": 105.0, "failures": []}]


def choose(path, judged, check=False):
    return run_module("sglang_allreduce_choice", {"choice_file": str(path), "candidates": CANDIDATES,
                                                  "rows": judged}, check=check, diff=True)


def test_the_winner_is_recorded_and_check_mode_writes_nothing(tmp_path):
    choice = tmp_path / "allreduce-choice.json"
    dry = choose(choice, rows(), check=True)
    assert dry["changed"] and dry["winner"] == "fusion" and not choice.exists()
    assert '"path": "fusion"' in dry["diff"]["after"]
    done = choose(choice, rows(fusion_passed=False))
    assert done["changed"] and done["winner"] == "nccl" and "rejected: fusion" in done["why"]
    recorded = json.loads(choice.read_text())
    assert recorded["path"] == "nccl" and recorded["candidates"] == CANDIDATES and len(recorded["paths"]) == 2


def test_no_winner_removes_the_record(tmp_path):
    choice = tmp_path / "allreduce-choice.json"
    choose(choice, rows())
    slow = [dict(r, passed=False, failures=["throughput: low"]) for r in rows(fusion=90.0, nccl=80.0)]
    result = choose(choice, slow)
    assert result["changed"] and result["winner"] is None and not choice.exists()
    assert choose(choice, slow)["changed"] is False  # nothing left to remove


def test_bad_rows_are_refused_with_their_reason_and_nothing_is_written(tmp_path):
    choice = tmp_path / "allreduce-choice.json"
    result = choose(choice, rows()[:1])
    assert result["failed"] and "no measurement for candidate path(s) nccl" in result["msg"]
    assert "Traceback" not in json.dumps(result) and not choice.exists()


@pytest.mark.parametrize("median", [float("nan"), float("inf"), 10 ** 400, True, 0.0])
def test_a_path_whose_median_is_not_a_rate_is_refused_and_nothing_is_written(tmp_path, median):
    """A NaN median compares false with everything: it must never win (nor lose) by accident."""
    choice = tmp_path / "allreduce-choice.json"
    choose(choice, rows())
    before = choice.read_text()
    result = choose(choice, rows(fusion=median))
    assert result["failed"] and "row fusion" in result["msg"] and "median_tok_s" in result["msg"], result
    assert "module_stderr" not in result and "Traceback" not in result["msg"]
    assert choice.read_text() == before and "nothing written" in result["msg"]
