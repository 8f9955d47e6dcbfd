"""filter_plugins/sglang_batches.py: what `serial` takes is accepted, anything else is named before a play starts."""

import pytest
from tests.helpers.script_module import load_file

sglang_batches = load_file("filter_plugins/sglang_batches.py", "sglang_batches")


@pytest.mark.parametrize("value", [1, 8, "3", "25%", " 100% ", "1%", [1, "25%"], ["50%", 4]])
def test_what_serial_takes_is_accepted(value):
    assert sglang_batches.sglang_batches_problem(value, "deploy_serial") == ""


@pytest.mark.parametrize("value, words", [
    (0, "1 or more"),
    (-2, "1 or more"),
    ("0", "1 or more"),
    ("abc", "not a count"),
    ("150%", "1%..100%"),
    ("0%", "1%..100%"),
    (True, "not a count"),
    (1.5, "not a count"),
    (None, "not a count"),
    ([], "empty list"),
    ([1, "x"], "'x' is not a count"),
])
def test_anything_else_is_named(value, words):
    problem = sglang_batches.sglang_batches_problem(value, "deploy_serial")
    assert problem.startswith("deploy_serial: ") and words in problem, problem


def test_rolling_plays_take_their_hosts_in_inventory_order():
    # group_by filled the group as results arrived: gpu3 finished first, and groups['all'] lists that group's hosts
    # first (as Ansible does); the inventory order is hostvars'.
    groups = {"all": ["gpu3", "gpu1", "gpu2", "other"], "sglang_server_restart": ["gpu3", "gpu1"]}
    inventory = ["gpu1", "gpu2", "gpu3", "other"]
    assert sglang_batches.sglang_rolling_hosts(groups, "sglang_server_restart", inventory) == ["gpu1", "gpu3"]
    assert sglang_batches.sglang_rolling_hosts(groups, "sglang_benchmark_failed", inventory) == []


def test_a_rolling_play_leaves_out_the_hosts_of_the_group_it_names():
    groups = {"sglang_benchmark_measure": ["gpu3", "gpu1", "gpu2"], "sglang_benchmark_not_passed": ["gpu1"]}
    inventory = ["gpu1", "gpu2", "gpu3"]
    assert sglang_batches.sglang_rolling_hosts(groups, "sglang_benchmark_measure", inventory,
                                               "sglang_benchmark_not_passed") == ["gpu2", "gpu3"]
    # A group not made yet (no host failed) leaves nothing out.
    assert sglang_batches.sglang_rolling_hosts({"sglang_benchmark_measure": ["gpu2"]}, "sglang_benchmark_measure",
                                               inventory, "sglang_benchmark_not_passed") == ["gpu2"]
