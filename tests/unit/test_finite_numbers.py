"""module_utils/finite_numbers.py: what the gate, its verdict and the all-reduce choice take for a number."""
import json

import pytest

from ansible.module_utils import finite_numbers as fn

NAN, INF = float("nan"), float("inf")
HUGE = 10 ** 400


@pytest.mark.parametrize("value,expected", [
    (85, 85.0), (85.5, 85.5), (0, 0.0), (-1, -1.0), (1e308, 1e308),
    (NAN, None), (INF, None), (-INF, None), (True, None), (False, None), ("85", None), (None, None),
    ([85], None), (HUGE, None),
])
def test_finite(value, expected):
    assert fn.finite(value) == expected


@pytest.mark.parametrize("value,expected", [
    (8, 8), (8.0, 8), (0, 0), (8.5, None), (-1, None), (True, None), ("8", None), (NAN, None), (INF, None),
    (HUGE, None),
])
def test_whole(value, expected):
    assert fn.whole(value) == expected


@pytest.mark.parametrize("value,why", [
    (NAN, "nan (not a finite number)"), (INF, "inf (not a finite number)"), (0, "0 (not above 0)"),
    (-2.5, "-2.5 (not above 0)"), (True, "True (a boolean, not a number)"), ("9", "'9' (not a number)"),
    (None, "None (not a number)"), (HUGE, "1000000000000000000000000000000000000... (not a finite number)"),
])
def test_rate_problem_names_the_value_and_why(value, why):
    assert fn.rate_problem(value, "x") == "x is %s: a rate must be a finite number above 0" % why
    assert fn.rate_problem(0.001, "x") is None and fn.rate_problem(10 ** 300, "x") is None


def test_json_safe_leaves_strict_json_and_copies():
    value = {"a": [1, NAN, {"b": INF, "c": -INF}], "d": True, "e": "NaN", "f": HUGE, "g": (2.5,), "h": None}
    safe = fn.json_safe(value)
    assert safe == {"a": [1, None, {"b": None, "c": None}], "d": True, "e": "NaN", "f": None, "g": [2.5], "h": None}
    json.dumps(safe, allow_nan=False)
    assert value["a"][2]["b"] == INF  # the input is not changed
