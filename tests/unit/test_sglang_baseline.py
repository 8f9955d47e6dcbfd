"""filter_plugins/sglang_baseline.py: whether a recorded baseline can be compared with this gate run."""
import json

import pytest
from tests.helpers.script_module import load_file

sglang_baseline = load_file("filter_plugins/sglang_baseline.py", "sglang_baseline")

RECORDED = {"input_len": 16, "output_len": 128, "num_prompts": 8, "seed": 1, "gate_concurrency": 1,
            "correctness_max_new_tokens": 32}
# What judged_by.yml notes: more keys than a baseline records (those are not compared), numbers maybe as text.
NOW = dict(RECORDED, repeats=3, margin_pct=5.0, client="controller")


def differences(baseline, settings):
    return sglang_baseline.sglang_baseline_differences(json.dumps(baseline), settings)


BASELINE = {"settings": RECORDED, "median_output_tok_s": 80.0}


def test_the_same_settings_are_comparable_whatever_else_the_run_notes():
    assert differences(BASELINE, NOW) == []
    assert differences(BASELINE, dict(NOW, output_len="128", seed="1")) == []


def test_each_recorded_setting_that_differs_is_named_with_both_values():
    assert differences(BASELINE, dict(NOW, output_len=64, seed=7)) == [
        "output_len: 128 recorded, 64 now", "seed: 1 recorded, 7 now"]


def test_a_setting_this_run_lacks_differs():
    now = {k: v for k, v in NOW.items() if k != "correctness_max_new_tokens"}
    assert differences(BASELINE, now) == ["correctness_max_new_tokens: 32 recorded, null now"]


@pytest.mark.parametrize("text, shown", [
    ('{"settings": %s, "median_output_tok_s": NaN}', "nan"),
    ('{"settings": %s, "median_output_tok_s": Infinity}', "inf"),
    ('{"settings": %s, "median_output_tok_s": 1e999}', "inf"),
    ('{"settings": %s, "median_output_tok_s": -Infinity}', "-inf"),
    ('{"settings": %s, "median_output_tok_s": 0}', "0"),
    ('{"settings": %s, "median_output_tok_s": -80.0}', "-80.0"),
    ('{"settings": %s, "median_output_tok_s": true}', "True"),
    ('{"settings": %s, "median_output_tok_s": "80"}', "'80'"),
    ('{"settings": %s}', "None"),
    ('{"settings": %s, "median_output_tok_s": 1' + "0" * 400 + '}', "1000000000000000000000000000000000000..."),
])
def test_a_baseline_without_a_usable_throughput_is_not_comparable(text, shown):
    """The gate cannot judge against it (any run would pass a NaN or 0 baseline): the deploy measures a new one."""
    [line] = sglang_baseline.sglang_baseline_differences(text % json.dumps(RECORDED), NOW)
    assert line == ("the baseline holds no usable throughput (median_output_tok_s %s is not a finite number "
                    "above 0)" % shown)


@pytest.mark.parametrize("text, why", [
    ("{not json", "the baseline cannot be read"),
    ("[1, 2]", "the baseline cannot be read"),
    ("", "the baseline cannot be read"),
    (json.dumps({"median_output_tok_s": 80.0}), "the baseline recorded no settings"),
    (json.dumps({"settings": {}}), "the baseline recorded no settings"),
])
def test_a_baseline_that_cannot_be_compared_says_why(text, why):
    [line] = sglang_baseline.sglang_baseline_differences(text, NOW)
    assert line.startswith(why)


def test_the_filter_is_registered_under_its_name():
    assert sglang_baseline.FilterModule().filters() == {
        "sglang_baseline_differences": sglang_baseline.sglang_baseline_differences}
