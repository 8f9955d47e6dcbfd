"""Our constructed SM120 lab profiles: what they describe, and that they keep the real formats."""
import re
import xml.etree.ElementTree as ET

import pytest

from ansible.module_utils import nvidia_smi as smi
from tests.helpers.gpu_fixtures import committed_profiles, profile, read_shared

RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def facts(name):
    return smi.summarize(smi.parse_query_xml(profile(name, "q-x.xml")),
                         smi.parse_query_csv(profile(name, "query-gpu.csv")),
                         smi.parse_topo_matrix(profile(name, "topo-m.txt")),
                         smi.parse_p2p_matrix(profile(name, "topo-p2p-r.txt")))


def test_the_profiles_that_exist():
    assert committed_profiles() == ["rtxpro6000-2x-p2p-blocked", "rtxpro6000-2x-pcie", "rtxpro6000-8x-pcie"]


@pytest.mark.parametrize("name", ["rtxpro6000-8x-pcie", "rtxpro6000-2x-pcie", "rtxpro6000-2x-p2p-blocked"])
def test_every_profile_is_an_sm120_pcie_host(name):
    got = facts(name)
    assert got["driver_version"].startswith("580.") and got["cuda_version"] == "13.0"
    assert got["compute_capabilities"] == ["12.0"] and got["nvlink"] is False
    for gpu in got["gpus"]:
        assert gpu["name"] == RTX and gpu["architecture"] == "Blackwell" and gpu["memory_total_mib"] == 97887
        assert gpu["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
        assert gpu["compute_capability_major"] == 12 and gpu["uuid"].startswith("GPU-")
    assert smi.inconsistencies(*[f(profile(name, n)) for f, n in (
        (smi.parse_query_xml, "q-x.xml"), (smi.parse_query_csv, "query-gpu.csv"),
        (smi.parse_topo_matrix, "topo-m.txt"), (smi.parse_p2p_matrix, "topo-p2p-r.txt"))]) == []


def test_8x_switch_box_like_the_published_asus_topology():
    got = facts("rtxpro6000-8x-pcie")
    assert got["gpu_count"] == 8 and got["link_types"] == ["NODE", "PIX", "SYS"] and got["all_p2p_ok"] is True
    matrix = got["topology"]["matrix"]
    assert [b for b in matrix["GPU0"] if matrix["GPU0"][b] == "PIX"] == ["GPU1"]
    assert [b for b in matrix["GPU5"] if matrix["GPU5"][b] == "NODE"] == ["GPU6", "GPU7"]
    assert [g["numa_affinity"] for g in got["gpus"]] == ["0"] * 4 + ["1"] * 4
    assert [g["minor_number"] for g in got["gpus"]] == [2, 3, 0, 1, 6, 7, 4, 5]  # not the index, as on real boxes


def test_2x_profiles_differ_only_in_p2p():
    good, blocked = facts("rtxpro6000-2x-pcie"), facts("rtxpro6000-2x-p2p-blocked")
    assert good["link_types"] == blocked["link_types"] == ["PHB"]
    assert good["all_p2p_ok"] is True and good["p2p_statuses"] == ["OK"]
    assert blocked["all_p2p_ok"] is False and blocked["p2p_statuses"] == ["CNS"]


def legend(text):
    return text[text.index("\nLegend:"):]


@pytest.mark.parametrize("name", ["rtxpro6000-8x-pcie", "rtxpro6000-2x-p2p-blocked"])
def test_profiles_keep_the_real_layout(name):
    """Same legends, header codes and row shapes as the real H200 capture (driver 580)."""
    real_topo = read_shared("h200x2-nvlink", "nvidia-smi_topo_-m.txt")
    real_p2p = read_shared("h200x2-nvlink", "nvidia-smi_topo_-p2p_r.txt")
    topo, p2p = profile(name, "topo-m.txt"), profile(name, "topo-p2p-r.txt")
    assert legend(topo) == legend(real_topo) and legend(p2p) == legend(real_p2p)
    assert topo.startswith("\t\x1b[4mGPU0\t") and real_topo.startswith("\t\x1b[4mGPU0\t")
    assert topo.splitlines()[0].endswith("\tGPU NUMA ID\x1b[0m") and real_topo.splitlines()[0].endswith("\tGPU NUMA ID\x1b[0m")
    assert topo.splitlines()[1].endswith("\t0\t\tN/A") and real_topo.splitlines()[1].endswith("\t0\t\tN/A")
    row = re.compile(r"^ GPU\d+(\t(X|OK|CNS|GNS|TNS|NS|U))+\t$")  # leading space, trailing tab, as captured
    for text in (p2p, real_p2p):
        assert text.startswith(" \t\x1b[4mGPU0\tGPU1\t")
        assert all(row.match(line) for line in text.split("\n\n")[0].splitlines()[1:])


def test_profile_xml_elements_follow_the_real_order():
    """Each trimmed GPU keeps real element names in the real order (a subsequence of the H200 capture's)."""
    real = [child.tag for child in ET.fromstring(read_shared("h200x2-nvlink", "nvidia-smi_-q_-x.xml")).find("gpu")]
    for name in committed_profiles():
        root = ET.fromstring(profile(name, "q-x.xml"))
        assert profile(name, "q-x.xml").startswith('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM '
                                                   '"nvsmi_device_v13.dtd">\n<nvidia_smi_log>\n')
        for gpu in root.findall("gpu"):
            tags = iter(real)
            assert all(tag in tags for tag in (child.tag for child in gpu)), name
