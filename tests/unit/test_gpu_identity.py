"""filter_plugins/gpu_identity.py: the GPUs and driver a canary verdict is kept for, from nvidia_gpu_facts."""
import json
import os

import pytest
from ansible.errors import AnsibleFilterError
from tests.helpers.script_module import load_file

identity = load_file("filter_plugins/gpu_identity.py", "gpu_identity").gpu_identity
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_names_in_index_order_and_the_driver():
    facts = {"driver_version": "580.65.06", "gpu_count": 2,
             "gpus": [{"index": 1, "name": "NVIDIA H200"}, {"index": 0, "name": "NVIDIA RTX PRO 6000"}]}
    assert identity(facts) == {"gpus": ["NVIDIA RTX PRO 6000", "NVIDIA H200"], "driver": "580.65.06"}


def test_the_real_h200_facts_give_their_gpus_and_driver():
    with open(os.path.join(REPO, "tests", "fixtures", "device", "h200x2_nvidia_gpu_facts.json"),
              encoding="utf-8") as handle:
        recorded = json.load(handle)
    facts = recorded["result"]["ansible_facts"]["nvidia_gpu"]  # the module run on 2x H200
    found = identity(facts)
    assert found["driver"] == facts["driver_version"] and len(found["gpus"]) == facts["gpu_count"] == 2
    assert all("H200" in name for name in found["gpus"])


@pytest.mark.parametrize("facts", [None, {}])
def test_unknown_facts_are_no_gpus_and_no_driver(facts):
    assert identity(facts) == {"gpus": [], "driver": None}


@pytest.mark.parametrize("facts", ["580.65.06", {"gpus": "NVIDIA H200"}, {"gpus": ["NVIDIA H200"]}])
def test_anything_else_is_refused_with_a_message(facts):
    with pytest.raises(AnsibleFilterError, match="gpu_identity"):
        identity(facts)
