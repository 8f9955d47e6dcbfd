"""The nvidia-smi parsers on real outputs: the project's 2x H200 capture and outputs RTX PRO 6000 / RTX 5090
owners published (read in place from ../shared/fixtures/gpu, skipped where absent)."""
import glob
import os

import pytest

from ansible.module_utils import nvidia_smi as smi
from tests.helpers.gpu_fixtures import SHARED, public_output, read_shared

H200 = "h200x2-nvlink"


def h200_parts():
    return (smi.parse_query_xml(read_shared(H200, "nvidia-smi_-q_-x.xml")),
            smi.parse_query_csv(read_shared(H200, "nvidia-smi_query-gpu.csv")),
            smi.parse_topo_matrix(read_shared(H200, "nvidia-smi_topo_-m.txt")),
            smi.parse_p2p_matrix(read_shared(H200, "nvidia-smi_topo_-p2p_r.txt")))


def pairs(matrix, status):
    """Unordered GPU pairs with this link or status."""
    return {tuple(sorted((a, b))) for a, row in matrix.items() for b, value in row.items()
            if a != b and value == status and a.startswith("GPU") and b.startswith("GPU")}


def test_h200_capture_summarized():
    facts = smi.summarize(*h200_parts())
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_version"] == "13.0"
    assert facts["gpu_count"] == 2
    assert facts["compute_capabilities"] == ["9.0"]
    assert facts["nvlink"] is True and facts["all_p2p_ok"] is True
    assert facts["link_types"] == ["NV18"] and facts["p2p_statuses"] == ["OK"]
    assert facts["topology"]["matrix"] == {"GPU0": {"GPU0": "X", "GPU1": "NV18"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}}
    assert facts["p2p"] == {"GPU0": {"GPU0": "X", "GPU1": "OK"}, "GPU1": {"GPU0": "OK", "GPU1": "X"}}
    first, second = facts["gpus"]
    assert first == {
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-0f3cc1cf-565d-9b0a-543c-d4b754f70410",
        "pci_bus_id": "00000000:00:06.0", "minor_number": 0, "architecture": "Hopper", "memory_total_mib": 143771,
        "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
        "mig_mode": "Disabled", "persistence_mode": "Enabled",
        "compute_capability": "9.0", "compute_capability_major": 9, "compute_capability_minor": 0,
        "cpu_affinity": "0-31", "numa_affinity": "0", "gpu_numa_id": None}
    assert (second["index"], second["pci_bus_id"], second["uuid"]) == (
        1, "00000000:00:07.0", "GPU-8f6284fb-6446-e1dc-1efd-0d08141350d4")
    assert smi.inconsistencies(*h200_parts()) == []


def test_h200_csv_with_units_and_header():
    rows = smi.parse_query_csv(read_shared(H200, "nvidia-smi_query-gpu.csv"))
    assert sorted(rows) == [0, 1]
    assert rows[1]["memory.total"] == "143771"  # "143771 MiB" under the header "memory.total [MiB]"
    assert rows[1]["pci.bus_id"] == "00000000:00:07.0" and rows[1]["driver_version"] == "580.159.04"
    assert (rows[0]["compute_capability"], rows[0]["compute_capability_major"],
            rows[0]["compute_capability_minor"]) == ("9.0", 9, 0)


def test_asus_8x_rtxpro6000_topology():
    topo = smi.parse_topo_matrix(public_output("topo_m_8x_rtxpro6000_asus_esc8000a_broadcom_raw.txt"))
    gpus = ["GPU%d" % i for i in range(8)]
    assert topo["gpus"] == gpus and topo["nics"] == [] and topo["nic_names"] == {}
    matrix = topo["matrix"]
    assert pairs(matrix, "PIX") == {("GPU0", "GPU1"), ("GPU2", "GPU3"), ("GPU4", "GPU5"), ("GPU6", "GPU7")}
    assert pairs(matrix, "NODE") == {("GPU0", "GPU2"), ("GPU0", "GPU3"), ("GPU1", "GPU2"), ("GPU1", "GPU3"),
                                     ("GPU4", "GPU6"), ("GPU4", "GPU7"), ("GPU5", "GPU6"), ("GPU5", "GPU7")}
    assert pairs(matrix, "SYS") == {("GPU%d" % a, "GPU%d" % b) for a in range(4) for b in range(4, 8)}
    assert all(matrix[g][g] == "X" for g in gpus)
    assert topo["affinity"]["GPU0"] == {"cpu_affinity": "0-63,128-191", "numa_affinity": "0", "gpu_numa_id": None}
    assert topo["affinity"]["GPU7"] == {"cpu_affinity": "64-127,192-238", "numa_affinity": "1", "gpu_numa_id": None}


def test_budgetserver_nic_row_column_and_legend_from_stripped_output():
    text = public_output("topo_m_8x_rtxpro6000_budgetserver_dualsocket_nic_raw.txt")
    assert not text.startswith("\t") and not text.endswith("\n")  # what .strip() left
    topo = smi.parse_topo_matrix(text)
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)]
    assert topo["nics"] == ["NIC0"] and topo["nic_names"] == {"NIC0": "rocep49s0"}
    assert [topo["matrix"]["GPU%d" % i]["NIC0"] for i in range(8)] == ["NODE"] * 4 + ["SYS"] * 4
    assert topo["matrix"]["NIC0"]["NIC0"] == "X" and topo["matrix"]["NIC0"]["GPU5"] == "SYS"
    assert "NIC0" not in topo["affinity"]
    assert pairs(topo["matrix"], "PIX") == set()
    assert topo["affinity"]["GPU4"]["numa_affinity"] == "1"


@pytest.mark.parametrize("name,expected", [
    ("topo_m_8x_rtxpro6000_wrx90_cpayne_3switch_pix_pxb_node.txt",
     {"PIX": 4, "PXB": 8, "NODE": 16}),
    ("topo_m_8x_rtxpro6000_wrx90_cpayne_2switch_flat_pix_node.txt", {"PIX": 12, "NODE": 16}),
    ("topo_m_4x_rtxpro6000maxq_phb_node_0xsero_issue4.txt", {"PHB": 1, "NODE": 5}),
])
def test_space_aligned_wiki_and_issue_pastes(name, expected):
    topo = smi.parse_topo_matrix(public_output(name))
    counts = {}
    for a, b in {tuple(sorted((a, b))) for a in topo["gpus"] for b in topo["gpus"] if a != b}:
        counts[topo["matrix"][a][b]] = counts.get(topo["matrix"][a][b], 0) + 1
    assert counts == expected
    assert topo["affinity"] == {}  # these pastes dropped the affinity columns


def test_two_gpu_phb_pastes_with_and_without_gpu_numa_id():
    issue = smi.parse_topo_matrix(public_output("topo_m_2x_rtxpro6000ws_coreultra_phb_issue15.txt"))
    assert issue["matrix"]["GPU0"]["GPU1"] == "PHB"
    assert issue["affinity"]["GPU1"] == {"cpu_affinity": "0-13", "numa_affinity": "0"}
    rig = smi.parse_topo_matrix(public_output("topo_m_2x_rtx5090_wrx80_phb_club3090_1133.txt"))
    assert rig["matrix"]["GPU1"]["GPU0"] == "PHB"
    assert rig["affinity"]["GPU0"] == {"cpu_affinity": "0-63", "numa_affinity": "0", "gpu_numa_id": None}


@pytest.mark.parametrize("name", ["p2p_rw_2x_rtx5090_wrx80_gns_club3090_1133.txt",
                                  "p2p_rw_2x_rtx5090_gen5x8_gns_club3090_1130_spaces.txt"])
def test_rtx5090_p2p_gns(name):
    p2p = smi.parse_p2p_matrix(public_output(name))
    assert p2p == {"GPU0": {"GPU0": "X", "GPU1": "GNS"}, "GPU1": {"GPU0": "GNS", "GPU1": "X"}}


def test_gns_is_not_all_p2p_ok():
    xml, csv, topo, _ = h200_parts()
    facts = smi.summarize(xml, csv, topo, smi.parse_p2p_matrix(
        public_output("p2p_rw_2x_rtx5090_wrx80_gns_club3090_1133.txt")))
    assert facts["all_p2p_ok"] is False and facts["p2p_statuses"] == ["GNS"]


def test_budgetserver_csv_noheader_nounits():
    fields = ["index", "name", "driver_version", "pci.bus_id", "pcie.link.gen.current", "pcie.link.width.current",
              "power.limit"]
    rows = smi.parse_query_csv(public_output("query_gpu_csv_8x_rtxpro6000se_budgetserver.txt"), fields=fields)
    assert sorted(rows) == list(range(8))
    assert rows[7]["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert rows[7]["pci.bus_id"] == "00000000:F1:00.0" and rows[0]["power.limit"] == "600.00"
    assert "compute_capability" not in rows[0]  # this query did not ask for compute_cap


def test_text_query_output_is_not_taken_for_xml():
    with pytest.raises(smi.ParseError, match="valid XML"):
        smi.parse_query_xml(public_output("smi_q_full_8x_rtxpro6000se_asus_esc8000a.txt"))


def test_every_public_and_unverified_topo_matrix_parses():
    files = sorted(glob.glob(os.path.join(SHARED, "public", "**", "topo_m_*.txt"), recursive=True))
    if not files:
        pytest.skip("no public topo -m files under %s" % SHARED)
    for path in files:
        topo = smi.parse_topo_matrix(public_output(os.path.relpath(path, os.path.join(SHARED, "public"))))
        gpus = topo["gpus"]
        assert len(gpus) in (2, 4, 8), path
        for a in gpus:
            assert topo["matrix"][a][a] == "X", path
            for b in gpus:
                assert topo["matrix"][a][b] == topo["matrix"][b][a], (path, a, b)
