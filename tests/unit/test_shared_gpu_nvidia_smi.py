"""The shared-GPU rehearsal's nvidia-smi view (scripts/device/shared_gpu_nvidia_smi.py), on a real one-GPU H200
reading: GPU 0 of the 2 x H200 capture, its second GPU taken out, shown as N ranks and read by the roles' own parser."""
import json
import os
import re
import xml.etree.ElementTree as ET

import pytest

from ansible.module_utils import nvidia_smi as smi
from tests.helpers.script_module import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
view = load_file(os.path.join(ROOT, "scripts", "device", "shared_gpu_nvidia_smi.py"), "shared_gpu_nvidia_smi")
with open(os.path.join(ROOT, "tests", "fixtures", "device", "h200x2_nvidia_gpu_facts.json"), encoding="utf-8") as fh:
    RAW = json.load(fh)["raw"]
CSV_ARGS = "--query-gpu=index,name,compute_cap,uuid,pci.bus_id,memory.total --format=csv"


def one_gpu():
    """The capture as a one-GPU machine prints it: GPU 1's element and row removed."""
    root = ET.fromstring(RAW["nvidia-smi -q -x"])
    root.remove(root.findall("gpu")[1])
    root.find("attached_gpus").text = "1"
    csv = RAW["nvidia-smi " + CSV_ARGS].splitlines()[:2]
    return ET.tostring(root, encoding="unicode"), "\n".join(csv) + "\n"


def facts(ranks):
    xml, csv = one_gpu()
    args = {"xml": (["-q", "-x"], xml), "csv": (CSV_ARGS.split(), csv),
            "topo": (["topo", "-m"], RAW["nvidia-smi topo -m"]), "p2p": (["topo", "-p2p", "r"], "")}
    shown = {name: view.view(argv, text, ranks) for name, (argv, text) in args.items()}
    parsed = (smi.parse_query_xml(shown["xml"]), smi.parse_query_csv(shown["csv"]),
              smi.parse_topo_matrix(shown["topo"]), smi.parse_p2p_matrix(shown["p2p"]))
    return smi.summarize(*parsed), smi.inconsistencies(*parsed)


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_the_one_gpu_is_shown_once_per_rank_and_the_parsers_agree(ranks):
    fact, problems = facts(ranks)
    assert problems == []
    assert fact["gpu_count"] == ranks
    assert [g["index"] for g in fact["gpus"]] == list(range(ranks))
    assert {g["name"] for g in fact["gpus"]} == {"NVIDIA H200"}
    assert fact["compute_capabilities"] == ["9.0"]
    assert len({g["pci_bus_id"] for g in fact["gpus"]}) == ranks
    assert len({g["uuid"] for g in fact["gpus"]}) == ranks
    assert fact["gpus"][0]["uuid"] == smi.parse_query_xml(RAW["nvidia-smi -q -x"])["gpus"][0]["uuid"]


def test_ranks_reach_each_other_and_no_gpu_link_is_claimed():
    fact, _problems = facts(2)
    assert fact["all_p2p_ok"] is True
    assert fact["nvlink"] is False and fact["link_types"] == ["SYS"]
    assert fact["gpus"][1]["cpu_affinity"] == fact["gpus"][0]["cpu_affinity"] == "0-31"


def test_a_machine_with_more_than_one_gpu_is_refused():
    with pytest.raises(ValueError, match="one-GPU machine; nvidia-smi lists 2"):
        view.view(["-q", "-x"], RAW["nvidia-smi -q -x"], 2)


def test_other_commands_pass_through_and_bus_ids_keep_their_format():
    assert view.view(["-L"], "GPU 0: NVIDIA H200 (UUID: GPU-x)\n", 2) == "GPU 0: NVIDIA H200 (UUID: GPU-x)\n"
    assert view.bus_id("00000000:00:06.0", 1) == "00000000:00:07.0"
    assert re.match(r"^0000:19:1F\.0$", view.bus_id("0000:19:1E.0", 1))
