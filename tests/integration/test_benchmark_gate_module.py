"""The sglang_benchmark_gate module through real Ansible: record, judge, artifacts, refusals."""
import json
import os

import pytest

from tests.helpers.ansible_run import run_module

SETTINGS = {"input_len": 16, "output_len": 48, "num_prompts": 2, "seed": 3, "gate_concurrency": 1,
            "correctness_max_new_tokens": 8}


def measurement(rate, ids=(1, 2, 3), **settings):
    runs = [{"concurrency": 1, "repeat": i, "rc": 0, "error": None,
             "result": {"completed": 2, "output_throughput": rate, "median_ttft_ms": 10.0, "median_tpot_ms": 7.0,
                        "accept_length": 2.0}} for i in (1, 2, 3)]
    return {"settings": dict(SETTINGS, **settings), "runs": runs, "client": {"sglang": "0.5.21"},
            "completions": [{"prompt": "p", "text": "x", "output_ids": list(ids)}]}


def gate(tmp_path, measured, **args):
    base = {"host": "h1", "measurement": measured, "baseline_file": str(tmp_path / "baselines" / "h1.json"),
            "results_dir": str(tmp_path / "results")}
    base.update(args)
    return run_module("sglang_benchmark_gate", base)


def test_record_then_pass_then_fail_writing_every_artifact(tmp_path):
    recorded = gate(tmp_path, measurement(85.0), record_baseline=True)
    assert recorded["changed"] and recorded["passed"], recorded
    with open(str(tmp_path / "baselines" / "h1.json"), encoding="utf-8") as handle:
        assert json.load(handle)["median_output_tok_s"] == 85.0

    passed = gate(tmp_path, measurement(130.0))
    assert passed["passed"] and not passed["changed"], passed
    slow = gate(tmp_path, measurement(80.0))
    assert not slow["passed"] and not slow.get("failed"), slow
    assert "80.0 tok/s < 89.2 tok/s required" in slow["message"]
    for key in ("run", "history", "summary", "chart"):
        assert os.path.exists(slow["artifacts"][key])
    with open(slow["artifacts"]["history"], encoding="utf-8") as handle:
        assert [json.loads(line)["passed"] for line in handle] == [True, False]


def test_wrong_completions_fail_and_other_settings_are_refused(tmp_path):
    gate(tmp_path, measurement(85.0), record_baseline=True)
    wrong = gate(tmp_path, measurement(300.0, ids=(7, 8, 9)))
    assert not wrong["passed"] and wrong["failures"][0].startswith("correctness"), wrong
    other = gate(tmp_path, measurement(300.0, output_len=64), baseline_mode="static", baseline_tok_s=82.0)
    assert other["failed"] and "measured with other settings" in other["msg"], other
    assert "measures a new one when the recorded one does not fit its settings" in other["msg"]


def test_no_baseline_is_an_error_not_a_pass(tmp_path):
    result = gate(tmp_path, measurement(300.0))
    assert result["failed"] and "no recorded baseline" in result["msg"], result


def test_a_trial_is_judged_without_artifacts_and_the_run_records_every_path(tmp_path):
    gate(tmp_path, measurement(85.0), record_baseline=True)
    trial = gate(tmp_path, measurement(120.0), write_artifacts=False)
    assert trial["passed"] and trial["artifacts"] == {} and not os.path.exists(str(tmp_path / "results" / "h1"))
    assert trial["verdict"]["median_tok_s"] == 120.0 and trial["correctness"]["match_rate"] == 1.0
    paths = {"winner": "nccl", "why": "nccl is the fastest correct path (120.0 tok/s)",
             "paths": [{"path": "fusion", "passed": False, "median_tok_s": 300.0, "failures": ["correctness"]},
                       {"path": "nccl", "passed": True, "median_tok_s": 120.0, "failures": []}]}
    judged = gate(tmp_path, measurement(120.0), allreduce=paths)
    assert judged["message"].endswith("All-reduce path (auto, every candidate measured): %s." % paths["why"])
    with open(judged["artifacts"]["run"], encoding="utf-8") as handle:
        assert json.load(handle)["allreduce"]["winner"] == "nccl"
    assert os.path.exists(judged["artifacts"]["allreduce_chart"])


def test_recording_over_a_baseline_it_cannot_compare_with_keeps_the_old_one(tmp_path):
    baselines = tmp_path / "baselines"
    gate(tmp_path, measurement(85.0), record_baseline=True)
    same = gate(tmp_path, measurement(90.0), record_baseline=True)  # the same settings: replaced, as in ab mode
    assert "replaced_baseline" not in same["artifacts"] and os.listdir(str(baselines)) == ["h1.json"]
    other = gate(tmp_path, measurement(70.0, output_len=64), record_baseline=True)
    kept = other["artifacts"]["replaced_baseline"]
    assert os.path.dirname(kept) == str(baselines) and os.path.basename(kept).startswith("h1.replaced-")
    assert "is kept as %s" % kept in other["message"]
    with open(kept, encoding="utf-8") as handle:
        old = json.load(handle)
    with open(str(baselines / "h1.json"), encoding="utf-8") as handle:
        new = json.load(handle)
    assert (old["median_output_tok_s"], old["settings"]["output_len"]) == (90.0, 48)
    assert (new["median_output_tok_s"], new["settings"]["output_len"]) == (70.0, 64)
    (baselines / "h1.json").write_text("{half a baseline")
    broken = gate(tmp_path, measurement(75.0, output_len=64), record_baseline=True)
    with open(broken["artifacts"]["replaced_baseline"], encoding="utf-8") as handle:
        assert handle.read() == "{half a baseline"
    assert len(os.listdir(str(baselines))) == 3


def test_recording_over_a_baseline_without_a_usable_throughput_keeps_it_aside_and_writes_strict_json(tmp_path):
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / "h1.json").write_text('{"median_output_tok_s": NaN, "settings": %s}' % json.dumps(SETTINGS))
    measured = measurement(85.0)
    measured["completions"][0]["top_logprobs"] = [[[1, float("-inf")], [2, -0.5]]]  # kept as null, not -Infinity
    recorded = gate(tmp_path, measured, record_baseline=True)
    with open(recorded["artifacts"]["replaced_baseline"], encoding="utf-8") as handle:
        assert "NaN" in handle.read()
    with open(str(baselines / "h1.json"), encoding="utf-8") as handle:
        new = json.loads(handle.read(), parse_constant=lambda name: pytest.fail("%s in the baseline" % name))
    assert new["median_output_tok_s"] == 85.0 and new["completions"][0]["top_logprobs"][0][0] == [1, None]
