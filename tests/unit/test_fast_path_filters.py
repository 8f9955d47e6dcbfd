"""filter_plugins/sglang_fast_path.py: the plays after the comparison leave out exactly the hosts that matched, and
the run says why for every host, once."""

import yaml
from ansible.inventory.manager import split_host_pattern

from tests.helpers.script_module import load_file

fast_path = load_file("filter_plugins/sglang_fast_path.py", "sglang_fast_path_filters")

# sglang_fast_path_comparison as the role registers it: the module's result, or a skipped task where the path is off.
MATCHED = {"sglang_fast_path_comparison": {"changed": False, "matched": True,
                                           "differences": {"nccl": [], "server": []}}}
NCCL = {"sglang_fast_path_comparison": {"changed": False, "matched": False, "differences": {
    "nccl": ["input var nccl_tuning_settings changed"], "server": []}}}
OFF = {"sglang_fast_path_comparison": {"changed": False, "skipped": True,
                                       "false_condition": "sglang_fast_path_enabled | bool"}}


def test_the_role_groups_hosts_under_the_name_the_plays_leave_out():
    with open("roles/sglang_fast_path/vars/main.yml", encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["__sglang_fast_path_group"] == fast_path.CONVERGED


def test_the_converged_group_is_left_out_only_once_it_exists():
    assert fast_path.sglang_without_converged("blackwell", {"all": [], "blackwell": ["a"]}) == ["blackwell"]
    groups = {"blackwell": ["a", "b"], fast_path.CONVERGED: ["a"]}
    assert fast_path.sglang_without_converged("blackwell", groups) == ["blackwell", "!" + fast_path.CONVERGED]


def test_every_pattern_form_keeps_its_meaning():
    # A comma list and a colon intersection stay whole: Ansible splits each list item on its own.
    groups = {fast_path.CONVERGED: ["a"]}
    for pattern, terms in [("gpu,cpu", ["gpu", "cpu"]), ("gpu:&rack1", ["gpu", "&rack1"]),
                           (["gpu", "cpu"], ["gpu", "cpu"])]:
        assert split_host_pattern(fast_path.sglang_without_converged(pattern, groups)) == terms + [
            "!" + fast_path.CONVERGED]


def test_only_hosts_that_matched_are_converged():
    hostvars = {"a": MATCHED, "b": NCCL, "c": OFF, "d": {}}
    assert fast_path.sglang_fast_path_converged(["a", "b", "c", "d"], hostvars) == ["a"]


def test_the_summary_names_matching_hosts_once_and_each_differing_host_with_what_differs():
    lines = fast_path.sglang_fast_path_summary(["a", "b", "c"], {"a": MATCHED, "b": NCCL, "c": MATCHED})
    assert len(lines) == 2
    assert lines[0].startswith("fast path on 2 of 3 hosts: every capability (nccl, server) matches")
    assert lines[0].endswith(": a, c")
    assert lines[1] == "full path on b: nccl: input var nccl_tuning_settings changed"


def test_with_the_fast_path_off_one_line_says_so():
    lines = fast_path.sglang_fast_path_summary(["a", "b"], {"a": OFF, "b": OFF})
    assert lines == ["fast path off (deploy_fast_path false): every role runs on a, b"]
