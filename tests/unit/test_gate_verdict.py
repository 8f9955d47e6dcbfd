"""The gate's recorded verdict: when a deploy must measure a host again, and what is written."""
import json

import pytest

from module_utils import gate_verdict

SETTINGS = {"margin_pct": 5.0, "num_prompts": 8, "prompts": ["a", "b"]}
DIGEST = gate_verdict.settings_digest(SETTINGS)


def recorded(passed=True, fingerprint="f" * 64, digest=DIGEST):
    text = gate_verdict.record(fingerprint, digest, passed, "2026-12-01T05:00:00+00:00", "passed: 140 tok/s", {})
    return gate_verdict.parse(text)


def test_a_verdict_for_the_same_fingerprint_and_settings_holds():
    verdict, problem = recorded()
    measure, reason = gate_verdict.decide(verdict, problem, "f" * 64, DIGEST, force=False)
    assert (measure, problem) == (False, None)
    assert "2026-12-01T05:00:00+00:00 still holds" in reason and "140 tok/s" in reason


@pytest.mark.parametrize("change,words", [
    ({"fingerprint": "e" * 64}, "what the server runs changed"),
    ({"digest": gate_verdict.settings_digest(dict(SETTINGS, margin_pct=10.0))}, "settings or baseline changed"),
    ({"force": True}, "forced (sglang_benchmark_force"),
    ({"passed": False}, "failed: judging again"),
    ({"none": True}, "no verdict recorded yet"),
    ({"no_start": True}, "no proven server start"),
])
def test_anything_to_judge_measures_again(change, words):
    verdict, problem = recorded(passed=change.get("passed", True))
    if change.get("none"):
        verdict, problem = gate_verdict.parse(None)
    fingerprint = None if change.get("no_start") else change.get("fingerprint", "f" * 64)
    measure, reason = gate_verdict.decide(verdict, problem, fingerprint, change.get("digest", DIGEST),
                                          change.get("force", False))
    assert measure and words in reason, reason


@pytest.mark.parametrize("text,words", [
    ("{not json", "not JSON"),
    ('["a list"]', "lacks"),
    ('{"version": 1, "fingerprint": "f"}', "lacks settings_digest, passed, at"),
    (json.dumps({"version": 99, "fingerprint": "f", "settings_digest": "d", "passed": True, "at": "x"}), "version 99"),
])
def test_an_unusable_record_is_measured_again_and_says_why(text, words):
    verdict, problem = gate_verdict.parse(text)
    assert verdict is None and words in problem
    measure, reason = gate_verdict.decide(verdict, problem, "f" * 64, DIGEST, force=False)
    assert measure and reason == problem


def test_the_digest_ignores_key_order_and_sees_every_value():
    assert gate_verdict.settings_digest({"a": 1, "b": [1, 2]}) == gate_verdict.settings_digest({"b": [1, 2], "a": 1})
    assert gate_verdict.settings_digest({"a": 1}) != gate_verdict.settings_digest({"a": 2})
    assert gate_verdict.settings_digest({"p": ["x", "y"]}) != gate_verdict.settings_digest({"p": ["y", "x"]})


def test_the_fingerprint_is_the_first_line_of_the_servers_record():
    assert gate_verdict.fingerprint_of("abc\n") == "abc"
    assert gate_verdict.fingerprint_of(None) is None
    assert gate_verdict.fingerprint_of("\n  \n") is None


@pytest.mark.parametrize("args,words", [
    (("", DIGEST, True, "at", "", {}), "no fingerprint"),
    (("f", DIGEST, True, "at", "", ["not", "a", "dict"]), "details must be a mapping"),
    (("f", DIGEST, True, "at", "", {"x": object()}), "cannot be written as JSON"),
])
def test_record_refuses_what_it_cannot_write(args, words):
    with pytest.raises(gate_verdict.VerdictError, match=words):
        gate_verdict.record(*args)


def test_settings_must_be_a_mapping_of_json_values():
    with pytest.raises(gate_verdict.VerdictError, match="mapping"):
        gate_verdict.settings_digest(["x"])
    with pytest.raises(gate_verdict.VerdictError, match="JSON"):
        gate_verdict.settings_digest({"x": object()})


def fields(**change):
    return json.dumps(dict({"version": 1, "fingerprint": "f" * 64, "settings_digest": DIGEST, "passed": True,
                            "at": "2026-12-01T05:00:00+00:00"}, **change))


@pytest.mark.parametrize("text,words", [
    (fields(passed="false"), "passed is 'false', not true or false"),  # a truthy string is no pass
    (fields(passed=1), "passed is 1, not true or false"),
    (fields(passed=None), "passed is None, not true or false"),
    (fields(version=True), "version True"),  # true == 1 in Python
    (fields(fingerprint=["f" * 64]), "fingerprint is ['fffffffffffffffffffffffffffffffffff..., not a string"),
    (fields(settings_digest=7), "settings_digest is 7, not a string"),
    (fields(at=None), "at is None, not a string"),
])
def test_a_record_whose_fields_have_the_wrong_kind_is_measured_again(text, words):
    verdict, problem = gate_verdict.parse(text)
    assert verdict is None and words in problem, problem
    measure, reason = gate_verdict.decide(verdict, problem, "f" * 64, DIGEST, force=False)
    assert measure and reason == problem
    assert gate_verdict.parse(fields())[1] is None


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nothing_non_finite_is_digested_or_recorded(value):
    with pytest.raises(gate_verdict.VerdictError, match="NaN or infinite"):
        gate_verdict.settings_digest({"margin_pct": value})
    with pytest.raises(gate_verdict.VerdictError, match="NaN or infinite number is never recorded"):
        gate_verdict.record("f", DIGEST, True, "at", "", {"verdict": {"median_tok_s": value}})


@pytest.mark.parametrize("passed", ["true", 1, None])
def test_record_takes_passed_only_as_a_boolean(passed):
    with pytest.raises(gate_verdict.VerdictError, match="passed must be true or false"):
        gate_verdict.record("f", DIGEST, passed, "at", "", {})
