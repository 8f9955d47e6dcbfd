"""nvidia_gpu_facts on a real 2x H200 host: the evidence scripts/device/gpu_facts_evidence.sh made there.

The file holds the module's result (through Ansible) and the raw nvidia-smi outputs of the same run, so the
facts are checked against known hardware and re-derived from the raw outputs independently.
"""
import json
import os
import re

import pytest

from ansible.module_utils import nvidia_smi as smi
from tests.helpers.ansible_run import REPO

EVIDENCE = os.path.join(REPO, "tests", "fixtures", "device", "h200x2_nvidia_gpu_facts.json")


@pytest.fixture(scope="module")
def evidence():
    if not os.path.exists(EVIDENCE):
        pytest.skip("no device evidence yet: run scripts/device/gpu_facts_evidence.sh on the 2x H200 machine and "
                    "commit its $OUT/h200x2_nvidia_gpu_facts.json as %s" % os.path.relpath(EVIDENCE, REPO))
    with open(EVIDENCE, encoding="utf-8") as handle:
        return json.load(handle)


def raw(evidence, command):
    found = [text for name, text in evidence["raw"].items() if name.startswith(command)]
    assert len(found) == 1, (command, sorted(evidence["raw"]))
    return found[0]


def test_module_ran_through_ansible_and_changed_nothing(evidence):
    result = evidence["result"]
    assert evidence["meta"]["ansible_rc"] == 0 and not result.get("failed"), result.get("msg")
    assert result["changed"] is False


def test_two_nvlinked_h200(evidence):
    facts = evidence["result"]["ansible_facts"]["nvidia_gpu"]
    assert facts["gpu_count"] == 2 and len(facts["gpus"]) == 2
    assert facts["compute_capabilities"] == ["9.0"]
    assert all(gpu["compute_capability"] == "9.0" and "H200" in gpu["name"] for gpu in facts["gpus"])
    assert facts["nvlink"] is True and facts["all_p2p_ok"] is True
    assert all(link.startswith("NV") for link in facts["link_types"])


def test_driver_and_cuda_match_the_raw_xml(evidence):
    xml = raw(evidence, "nvidia-smi -q -x")
    facts = evidence["result"]["ansible_facts"]["nvidia_gpu"]
    assert facts["driver_version"] == re.search(r"<driver_version>([^<]+)</driver_version>", xml).group(1)
    assert facts["cuda_version"] == re.search(r"<cuda_version>([^<]+)</cuda_version>", xml).group(1)


def test_facts_are_what_the_parsers_read_from_the_raw_outputs(evidence):
    expected = smi.summarize(smi.parse_query_xml(raw(evidence, "nvidia-smi -q -x")),
                             smi.parse_query_csv(raw(evidence, "nvidia-smi --query-gpu=")),
                             smi.parse_topo_matrix(raw(evidence, "nvidia-smi topo -m")),
                             smi.parse_p2p_matrix(raw(evidence, "nvidia-smi topo -p2p r")))
    assert evidence["result"]["ansible_facts"]["nvidia_gpu"] == json.loads(json.dumps(expected))
