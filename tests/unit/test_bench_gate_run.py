"""One benchmark gate run from the module's parameters (module_utils/bench_gate_run.py): the baseline recorded and
the one it replaces kept or not, the settings refusal, completions the runner could not get, bad input, the
artifacts; and the module (library/sglang_benchmark_gate.py) kept a thin shell around it."""
import ast
import datetime
import importlib.util
import json
import os

import pytest

from ansible.module_utils import bench_gate_run as gr

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = os.path.join(REPO, "library", "sglang_benchmark_gate.py")
SETTINGS = {"input_len": 16, "output_len": 48, "num_prompts": 2, "seed": 3, "gate_concurrency": 1,
            "correctness_max_new_tokens": 8}
NOW = datetime.datetime(2026, 11, 30, 10, 0, 0, 123456, tzinfo=datetime.timezone.utc)
LATER = NOW + datetime.timedelta(hours=1)
SHELL_LIMIT = 60


def load_shell():
    spec = importlib.util.spec_from_file_location("sglang_benchmark_gate_shell", MODULE)
    shell = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shell)
    return shell


ARGUMENT_SPEC = load_shell().ARGUMENT_SPEC


def measurement(rate=85.0, ids=(1, 2, 3), completed=2, **settings):
    runs = [{"concurrency": 1, "repeat": i, "rc": 0, "error": None,
             "result": {"completed": completed, "output_throughput": rate, "median_ttft_ms": 10.0,
                        "median_tpot_ms": 7.0, "accept_length": 2.0}} for i in (1, 2, 3)]
    return {"settings": dict(SETTINGS, **settings), "runs": runs, "client": {"sglang": "0.5.21"},
            "completions": [{"prompt": "p", "text": "x", "output_ids": list(ids)}]}


def params(tmp_path, measured, **overrides):
    """The parameters as the module hands them over: the argument spec's defaults, then these."""
    p = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    p.update(host="h1", measurement=measured, baseline_file=str(tmp_path / "baselines" / "h1.json"),
             results_dir=str(tmp_path / "results"))
    p.update(overrides)
    return p


def record(tmp_path, measured, now=NOW, **overrides):
    return gr.run(params(tmp_path, measured, record_baseline=True, **overrides), now=now)


def failure(tmp_path, measured, **overrides):
    with pytest.raises(gr.GateFailure) as raised:
        gr.run(params(tmp_path, measured, **overrides), now=LATER)
    assert not os.path.exists(str(tmp_path / "results")), "a refused run wrote artifacts"
    return raised.value


def read(path):
    with open(str(path), encoding="utf-8") as handle:
        return json.loads(handle.read(), parse_constant=lambda name: pytest.fail("%s in %s" % (name, path)))


# --- the baseline recorded -------------------------------------------------------------------------------------

def test_recording_writes_the_baseline_file_and_says_what_it_holds(tmp_path):
    measured = measurement(85.0)
    measured["completions"][0]["top_logprobs"] = [[[1, float("-inf")], [2, -0.5]]]
    result = record(tmp_path, measured, context={"venv": "/opt/v"})
    path = str(tmp_path / "baselines" / "h1.json")
    assert result["changed"] and result["passed"] and result["failures"] == []
    assert result["artifacts"] == {"baseline": path}
    assert result["message"] == ("h1: baseline recorded: median 85.0 tok/s at concurrency 1, 1 completions, in %s"
                                 % path)
    baseline = read(path)
    assert baseline["median_output_tok_s"] == 85.0 and baseline["recorded_at"] == NOW.isoformat()
    assert baseline["settings"] == SETTINGS and baseline["context"] == {"venv": "/opt/v"}
    assert baseline["completions"][0]["top_logprobs"][0][0] == [1, None]  # -inf is written as null
    assert os.listdir(str(tmp_path / "baselines")) == ["h1.json"]


def test_a_new_baseline_of_the_same_settings_replaces_the_old_one(tmp_path):
    record(tmp_path, measurement(85.0))
    again = record(tmp_path, measurement(90.0), now=None)  # the time of the recording
    assert "replaced_baseline" not in again["artifacts"] and "kept as" not in again["message"]
    assert os.listdir(str(tmp_path / "baselines")) == ["h1.json"]
    baseline = read(tmp_path / "baselines" / "h1.json")
    assert baseline["median_output_tok_s"] == 90.0
    assert datetime.datetime.fromisoformat(baseline["recorded_at"]).utcoffset() == datetime.timedelta(0)


@pytest.mark.parametrize("old", [
    json.dumps({"median_output_tok_s": 85.0, "settings": dict(SETTINGS, output_len=64)}),  # other settings
    "{half a baseline",  # unreadable
    '{"median_output_tok_s": NaN, "settings": %s}' % json.dumps(SETTINGS),  # no usable throughput
    "[1, 2]",  # no JSON object
])
def test_a_baseline_it_cannot_be_compared_with_is_kept_aside_not_overwritten(tmp_path, old):
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / "h1.json").write_text(old)
    result = record(tmp_path, measurement(70.0), now=LATER)
    kept = str(baselines / "h1.replaced-20261130T110000.123456Z.json")
    assert result["artifacts"] == {"baseline": str(baselines / "h1.json"), "replaced_baseline": kept}
    assert result["message"].endswith(" (the one it replaces, not comparable with it, is kept as %s)" % kept)
    with open(kept, encoding="utf-8") as handle:
        assert handle.read() == old
    assert read(baselines / "h1.json")["median_output_tok_s"] == 70.0


def test_a_baseline_folder_that_cannot_be_made_is_the_gates_own_message(tmp_path):
    (tmp_path / "baselines").write_text("a file where the folder goes")
    with pytest.raises(gr.GateFailure) as raised:
        record(tmp_path, measurement(70.0))
    assert raised.value.msg.startswith("h1: could not record the baseline in %s: " % (tmp_path / "baselines" / "h1.json"))
    assert "summary" in raised.value.fields


def test_a_baseline_that_cannot_be_written_puts_the_one_it_was_to_replace_back(tmp_path, monkeypatch):
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / "h1.json").write_text("[1, 2]")

    def full_disk(path, data, *args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(gr.atomic_files, "write_atomic", full_disk)
    with pytest.raises(gr.GateFailure) as raised:
        record(tmp_path, measurement(70.0), now=LATER)
    assert "No space left on device" in raised.value.msg
    assert sorted(os.listdir(str(baselines))) == ["h1.json"] and (baselines / "h1.json").read_text() == "[1, 2]"


def test_keep_other_baseline_moves_nothing_when_there_is_none_and_names_a_file_without_a_suffix(tmp_path):
    assert gr.keep_other_baseline(str(tmp_path / "none.json"), SETTINGS, NOW) is None
    bare = tmp_path / "h1"
    bare.write_text("{}")
    kept = gr.keep_other_baseline(str(bare), SETTINGS, NOW)
    assert kept == str(tmp_path / "h1.replaced-20261130T100000.123456Z.json") and not bare.exists()


@pytest.mark.parametrize("measured,overrides,words", [
    (measurement(completed=1), {}, "cannot record a baseline from an incomplete measurement: run 1: completed 1 of 2"),
    (measurement(), {"gate_concurrency": 2},
     "cannot record a baseline from an incomplete measurement: no runs at concurrency 2"),
])
def test_no_baseline_is_recorded_from_an_incomplete_measurement(tmp_path, measured, overrides, words):
    refused = failure(tmp_path, measured, record_baseline=True, **overrides)
    assert refused.msg.startswith("h1: ") and words in refused.msg, refused.msg
    assert set(refused.fields) == {"summary"} and not os.path.exists(str(tmp_path / "baselines"))


@pytest.mark.parametrize("median", [float("nan"), 0.0, True])
def test_a_median_that_is_not_a_rate_is_never_recorded(tmp_path, median):
    """summarize() counts only finite rates above 0; the check where the baseline is written holds without it."""
    summary = {1: {"runs": 3, "counted": 3, "median_output_tok_s": median, "problems": []}}
    with pytest.raises(gr.GateFailure) as raised:
        gr.record_baseline(params(tmp_path, measurement(), record_baseline=True), measurement(), summary, NOW)
    assert raised.value.msg.startswith("h1: cannot record a baseline: the median output throughput is ")
    assert raised.value.fields == {"summary": summary} and not os.path.exists(str(tmp_path / "baselines"))


def test_no_baseline_completions_are_recorded_from_a_runner_that_could_not_get_them(tmp_path):
    broken = measurement()
    broken["completions"] = [{"prompt": "p", "error": "HTTP 500"}, {"prompt": "q", "error": "timed out"}]
    refused = failure(tmp_path, broken, record_baseline=True)
    assert refused.msg == "h1: cannot record baseline completions: HTTP 500; timed out" and refused.fields == {}
    empty = dict(measurement(), completions=[])
    assert failure(tmp_path, empty, record_baseline=True).msg == (
        "h1: cannot record baseline completions: none were measured")
    assert not os.path.exists(str(tmp_path / "baselines"))
    recorded = record(tmp_path, empty, correctness=False)  # throughput alone needs no completions
    assert "0 completions" in recorded["message"]


# --- judged against the baseline --------------------------------------------------------------------------------

def test_a_recorded_baseline_judges_the_run_and_the_artifacts_are_written(tmp_path):
    record(tmp_path, measurement(85.0))
    paths = {"winner": "nccl", "why": "nccl is the fastest correct path"}
    judged = gr.run(params(tmp_path, measurement(120.0), context={"venv": "/opt/v", "rolled_back": False},
                           allreduce=paths), now=LATER)
    assert judged["passed"] and not judged["changed"] and judged["failures"] == []
    assert judged["verdict"] == {"median_tok_s": 120.0, "bar_tok_s": pytest.approx(89.25), "baseline_tok_s": 85.0,
                                 "margin_pct": 5.0, "gate_concurrency": 1}
    assert list(judged["summary"]) == ["1"] and judged["correctness"]["match_rate"] == 1.0
    assert "file, recorded %s" % NOW.isoformat() in judged["message"]
    assert judged["message"].endswith(" All-reduce path (auto, every candidate measured): %s." % paths["why"])
    assert judged["artifacts"]["run"] == str(tmp_path / "results" / "h1" / "runs" / "20261130T110000.123456Z.json")
    run = read(judged["artifacts"]["run"])
    assert (run["venv"], run["rolled_back"], run["sglang"], run["allreduce"]) == ("/opt/v", False, "0.5.21", paths)
    assert run["message"] == judged["message"] and run["match_rate"] == 1.0
    assert os.path.exists(judged["artifacts"]["allreduce_chart"])


def test_a_trial_is_judged_without_writing_artifacts(tmp_path):
    record(tmp_path, measurement(85.0))
    slow = gr.run(params(tmp_path, measurement(80.0), write_artifacts=False), now=LATER)
    assert not slow["passed"] and slow["artifacts"] == {} and not os.path.exists(str(tmp_path / "results"))
    assert slow["failures"][0].startswith("throughput") and "80.0 tok/s < 89.2 tok/s required" in slow["message"]


def test_a_run_with_other_settings_is_refused_against_a_recorded_baseline(tmp_path):
    record(tmp_path, measurement(85.0))
    for overrides in ({}, {"baseline_mode": "static", "baseline_tok_s": 82.0}):
        refused = failure(tmp_path, measurement(300.0, output_len=64), **overrides)
        assert refused.msg.startswith("h1: benchmark gate cannot judge: the baseline in %s was measured with other "
                                      "settings" % (tmp_path / "baselines" / "h1.json")), refused.msg
        assert "'output_len': 64" in refused.msg and "two more restarts" in refused.msg


def test_a_static_baseline_without_correctness_does_not_need_the_recorded_settings(tmp_path):
    record(tmp_path, measurement(85.0))
    judged = gr.run(params(tmp_path, measurement(300.0, output_len=64), baseline_mode="static",
                           baseline_tok_s=82.0, correctness=False, write_artifacts=False), now=LATER)
    assert judged["passed"] and judged["correctness"] is None and "static" in judged["message"]


def test_completions_the_runner_could_not_get_fail_correctness_with_their_errors(tmp_path):
    record(tmp_path, measurement(85.0))
    broken = measurement(300.0)
    broken["completions"] = [{"prompt": "p", "error": "HTTP 500"}, {"prompt": "q", "text": "x", "output_ids": [1]}]
    judged = gr.run(params(tmp_path, broken, write_artifacts=False), now=LATER)
    assert not judged["passed"] and judged["failures"][0].startswith("correctness"), judged
    assert judged["correctness"] == {"prompts": 2, "match_rate": 0.0, "rows": [], "errors": ["HTTP 500"]}


def test_wrong_completions_fail_a_fast_run(tmp_path):
    record(tmp_path, measurement(85.0))
    wrong = gr.run(params(tmp_path, measurement(300.0, ids=(7, 8, 9)), write_artifacts=False), now=LATER)
    assert not wrong["passed"] and wrong["correctness"]["match_rate"] == 0.0


@pytest.mark.parametrize("overrides,words", [
    ({}, "no recorded baseline at {file} (baseline_mode file)"),
    ({"baseline_mode": "ab"}, "no recorded baseline at {file} (baseline_mode ab)"),
    ({"baseline_mode": "static", "baseline_tok_s": 82.0},
     "no recorded completions to check correctness against ({file}): record a baseline first"),
    ({"baseline_mode": "static"}, "baseline_mode static needs baseline_tok_s, a finite number above 0"),
])
def test_without_a_baseline_nothing_is_judged(tmp_path, overrides, words):
    refused = failure(tmp_path, measurement(300.0), **overrides)
    assert refused.msg.startswith("h1: benchmark gate cannot judge: " + words.format(
        file=tmp_path / "baselines" / "h1.json")), refused.msg


@pytest.mark.parametrize("content,words", [
    ("{half", "cannot read the baseline file {file}: "),
    ('{"median_output_tok_s": 0, "settings": %s}' % json.dumps(SETTINGS), "the baseline file {file} cannot judge"),
])
def test_a_baseline_file_that_cannot_judge_is_named(tmp_path, content, words):
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "h1.json").write_text(content)
    refused = failure(tmp_path, measurement(300.0))
    assert words.format(file=tmp_path / "baselines" / "h1.json") in refused.msg, refused.msg


def test_a_baseline_without_its_time_says_so(tmp_path):
    assert gr.baseline_number({"baseline_mode": "file", "baseline_file": "b.json"},
                              {"median_output_tok_s": 85.0}) == (85.0, "file, recorded at an unrecorded time")
    assert gr.baseline_number({"baseline_mode": "static", "baseline_tok_s": 82.0}, None) == (82.0, "static")


# --- bad input ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides,words", [
    ({"host": "../x"}, "cannot name a results folder"),
    ({"margin_pct": -1.0}, "margin_pct must be a finite number, 0 or more"),
    ({"gate_concurrency": 0}, "gate_concurrency"),
    ({"min_match_rate": 1.5}, "min_match_rate"),
    ({"tie_max_gap": 2.0}, "tie_max_gap must be from 0 to 0.5"),
])
def test_bad_parameters_are_refused_before_anything_is_read_or_written(tmp_path, overrides, words):
    refused = failure(tmp_path, measurement(), record_baseline=True, **overrides)
    assert refused.msg.startswith("benchmark gate refused its inputs, nothing written: ") and words in refused.msg
    assert not os.path.exists(str(tmp_path / "baselines"))


@pytest.mark.parametrize("measured,words", [
    (dict(measurement(), settings="x"), "'str' object has no attribute 'get'"),
    (dict(measurement(), settings=dict(SETTINGS, num_prompts=2.5)), "num_prompts"),
    (dict(measurement(), runs="none"), "runs must be a list"),
])
def test_a_measurement_of_the_wrong_shape_cannot_be_judged_or_recorded(tmp_path, measured, words):
    for record_it in (False, True):
        refused = failure(tmp_path, measured, record_baseline=record_it, baseline_mode="static", baseline_tok_s=80.0)
        assert refused.msg.startswith("h1: benchmark gate cannot judge: ") and words in refused.msg, refused.msg


def test_artifacts_that_cannot_be_written_fail_with_the_verdict(tmp_path):
    (tmp_path / "results").write_text("a file, not a folder")
    with pytest.raises(gr.GateFailure) as raised:
        gr.run(params(tmp_path, measurement(120.0), baseline_mode="static", baseline_tok_s=80.0,
                      correctness=False), now=LATER)
    assert raised.value.msg.startswith("h1: could not write the benchmark artifacts under %s: "
                                       % (tmp_path / "results"))
    assert raised.value.fields["passed"] is True and raised.value.fields["message"].startswith("h1: benchmark gate")


def test_an_integer_no_float_holds_is_named_by_option():
    raw = gr.raw_floats(ARGUMENT_SPEC)
    assert raw["margin_pct"] == {"type": "raw", "default": 5.0} and raw["host"] == ARGUMENT_SPEC["host"]
    assert ARGUMENT_SPEC["margin_pct"]["type"] == "float"  # the module's own spec is left as it was
    huge = {"margin_pct": 10 ** 400, "baseline_tok_s": 82, "min_match_rate": True}
    assert gr.too_large(ARGUMENT_SPEC, huge) == ("benchmark gate refused its inputs, nothing written: too large for "
                                                 "a number (an integer no float holds): margin_pct")
    assert gr.too_large(ARGUMENT_SPEC, {}).endswith(
        "holds): baseline_tok_s, margin_pct, min_match_rate, tie_max_gap")


# --- the module stays a shell ----------------------------------------------------------------------------------------

def code_lines_after_docs(source):
    """Non-blank, non-comment lines after the RETURN block (the statement assigning RETURN)."""
    ends = [node.end_lineno for node in ast.parse(source).body if isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "RETURN" for target in node.targets)]
    if not ends:
        raise AssertionError("no RETURN block")
    return [line for line in source.splitlines()[ends[0]:] if line.strip() and not line.strip().startswith("#")]


def test_the_line_counter_counts_code_and_skips_docs_comments_and_blanks():
    source = ('DOCUMENTATION = r"""\nx: 1\n"""\nRETURN = r"""\nfoo:\n  type: str\n"""\n\n# why\n'
              'import os\n\n\ndef main():\n    # a comment\n    return os.sep  # trailing\n')
    assert code_lines_after_docs(source) == ["import os", "def main():", "    return os.sep  # trailing"]
    with pytest.raises(AssertionError, match="no RETURN"):
        code_lines_after_docs("import os\n")


def test_the_module_is_a_thin_shell():
    with open(MODULE, encoding="utf-8") as handle:
        lines = code_lines_after_docs(handle.read())
    assert len(lines) <= SHELL_LIMIT, "library/sglang_benchmark_gate.py has %d code lines after its docs (at most " \
        "%d): move logic into module_utils/bench_gate_run.py" % (len(lines), SHELL_LIMIT)
