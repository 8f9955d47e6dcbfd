"""filter_plugins/sglang_tp_size.py: the server's tensor-parallel size where none is set, for every role that sizes
after the server."""
import os
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from tests.helpers.script_module import load_file

default_tp = load_file("filter_plugins/sglang_tp_size.py", "sglang_tp_size").sglang_default_tp_size
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("facts,expected", [
    (None, 1), ({}, 1), ({"gpu_count": 8, "gpus": []}, 8), ({"gpu_count": 2}, 2), ({"gpu_count": 0}, 0)])
def test_every_gpu_of_the_host_or_one_without_facts(facts, expected):
    assert default_tp(facts) == expected


@pytest.mark.parametrize("facts", ["8", [8], {"gpu_count": "8"}, {"gpu_count": True}, {"gpu_count": -1}])
def test_facts_that_are_not_nvidia_gpu_facts_are_refused_by_name(facts):
    with pytest.raises(AnsibleFilterError, match="sglang_default_tp_size"):
        default_tp(facts)


@pytest.mark.parametrize("role,variable", [("sglang_server", "sglang_server_tp_size"),
                                           ("sglang_allreduce", "sglang_allreduce_tp_size")])
def test_every_role_sizing_after_the_server_takes_the_default_from_the_filter(role, variable):
    # one owner: a role that typed its own fallback (the GPU count, or 1) could size another server
    with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as handle:
        line = " ".join(yaml.safe_load(handle)[variable].split())
    assert "sglang_default_tp_size" in line and "gpu_count" not in line, line
    assert re.search(r"nvidia_gpu \| default\(none\) \| sglang_default_tp_size", line), line
