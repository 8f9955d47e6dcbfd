"""The parsers on format variants and broken input (texts written here, in the real layouts)."""
import pytest

from ansible.module_utils import nvidia_smi as smi

ESC = "\x1b"
TOPO = ("\t%s[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID%s[0m\n"
        "GPU0\t X \tNV12\tPXB\t0-15,32-47\t0\t\tN/A\n"
        "GPU1\tNV12\t X \tSYS\t16-31,48-63\t1\t\tN/A\n"
        "NIC0\tPXB\tSYS\t X \t\t\t\t\n"
        "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
        "\nNIC Legend:\n\n  NIC0: mlx5_0\n") % (ESC, ESC)
P2P = (" \t%s[4mGPU0\tGPU1\t%s[0m\n GPU0\tX\tCNS\t\n GPU1\tCNS\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n"
       % (ESC, ESC))
XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">
<nvidia_smi_log>
\t<driver_version>580.105.08</driver_version>
\t<cuda_version>13.0</cuda_version>
\t<attached_gpus>2</attached_gpus>
\t<gpu id="00000000:0B:00.0">
\t\t<product_name>NVIDIA RTX PRO 6000 Blackwell Server Edition</product_name>
\t\t<minor_number>1</minor_number>
\t\t<pci><pci_bus_id>00000000:0B:00.0</pci_bus_id></pci>
\t</gpu>
\t<gpu id="00000000:0C:00.0">
\t\t<product_name>NVIDIA RTX PRO 6000 Blackwell Server Edition</product_name>
\t\t<minor_number>N/A</minor_number>
\t\t<mig_mode><current_mig>N/A</current_mig></mig_mode>
\t\t<pci><pci_bus_id>00000000:0C:00.0</pci_bus_id></pci>
\t</gpu>
</nvidia_smi_log>
"""


def expected_topo():
    return smi.parse_topo_matrix(TOPO)


def test_topo_with_nic_and_affinity():
    topo = expected_topo()
    assert topo["gpus"] == ["GPU0", "GPU1"] and topo["nics"] == ["NIC0"]
    assert topo["nic_names"] == {"NIC0": "mlx5_0"}
    assert topo["matrix"]["GPU0"] == {"GPU0": "X", "GPU1": "NV12", "NIC0": "PXB"}
    assert topo["matrix"]["NIC0"] == {"GPU0": "PXB", "GPU1": "SYS", "NIC0": "X"}
    assert topo["affinity"]["GPU1"] == {"cpu_affinity": "16-31,48-63", "numa_affinity": "1", "gpu_numa_id": None}


@pytest.mark.parametrize("variant", [
    lambda t: t.expandtabs(8),                      # pasted with tabs expanded
    lambda t: t.expandtabs(4).replace(ESC + "[4m", "").replace(ESC + "[0m", ""),
    lambda t: t.strip(),                            # captured with .strip()
    lambda t: t.replace("\n", "\r\n"),              # CRLF from a Windows paste
    lambda t: "$ nvidia-smi topo -m\n" + t,         # a prompt line before it
    lambda t: t.split("\nLegend")[0],               # no Legend
])
def test_topo_variants_read_the_same(variant):
    got = smi.parse_topo_matrix(variant(TOPO))
    want = expected_topo()
    assert got["matrix"] == want["matrix"] and got["affinity"] == want["affinity"]


def test_topo_without_affinity_columns():
    text = "        GPU0    GPU1\nGPU0     X      PHB\nGPU1    PHB      X\n"
    assert smi.parse_topo_matrix(text)["affinity"] == {}


def test_single_gpu_topo_and_summary():
    topo = smi.parse_topo_matrix("\t%s[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID%s[0m\n"
                                 "GPU0\t X \t0-31\t0\t\tN/A\n" % (ESC, ESC))
    p2p = smi.parse_p2p_matrix(" \tGPU0\t\n GPU0\tX\t\n")
    assert topo["matrix"] == {"GPU0": {"GPU0": "X"}} and topo["affinity"]["GPU0"]["cpu_affinity"] == "0-31"
    xml = smi.parse_query_xml(XML.replace("<attached_gpus>2", "<attached_gpus>1"))
    xml["gpus"] = xml["gpus"][:1]
    facts = smi.summarize(xml, {}, topo, p2p)
    assert facts["all_p2p_ok"] is True and facts["nvlink"] is False and facts["gpu_count"] == 1
    assert facts["gpus"][0]["compute_capability"] is None and facts["compute_capabilities"] == []


@pytest.mark.parametrize("text,message", [
    ("", "no header"),
    ("No devices were found\n", "no header"),
    ("\tGPU0\tGPU1\nGPU0\t X \tPIX\n", "no row for GPU1"),
    ("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tPIX\t X \n", "row GPU0 has 1 cells, expected 2"),
])
def test_topo_refuses_what_it_cannot_read(text, message):
    with pytest.raises(smi.ParseError, match=message):
        smi.parse_topo_matrix(text)


def test_p2p_variants():
    want = {"GPU0": {"GPU0": "X", "GPU1": "CNS"}, "GPU1": {"GPU0": "CNS", "GPU1": "X"}}
    assert smi.parse_p2p_matrix(P2P) == want
    assert smi.parse_p2p_matrix(P2P.expandtabs(8).strip()) == want


def test_xml_index_is_document_order_not_minor_number():
    info = smi.parse_query_xml(XML)
    assert [(g["index"], g["minor_number"]) for g in info["gpus"]] == [(0, 1), (1, None)]
    assert info["gpus"][1]["mig_mode"] is None  # N/A
    assert info["gpus"][0]["pcie"] == {"gen_current": None, "gen_max": None, "width_current": None, "width_max": None}
    assert (info["driver_version"], info["cuda_version"], info["attached_gpus"]) == ("580.105.08", "13.0", 2)


@pytest.mark.parametrize("text,message", [("<nvidia_smi_log>", "valid XML"), ("<other/>", "expected <nvidia_smi_log>")])
def test_xml_refusals(text, message):
    with pytest.raises(smi.ParseError, match=message):
        smi.parse_query_xml(text)


def test_csv_forms():
    header = ("index, name, compute_cap, uuid, pci.bus_id, memory.total [MiB]\n"
              "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, GPU-1, 00000000:0B:00.0, 97887 MiB\n"
              "1, NVIDIA RTX PRO 6000 Blackwell Server Edition, [N/A], GPU-2, 00000000:0C:00.0, 97887 MiB\n")
    rows = smi.parse_query_csv(header)
    assert rows[0]["compute_capability"] == "12.0" and rows[0]["compute_capability_major"] == 12
    assert rows[0]["memory.total"] == "97887" and rows[1]["compute_capability"] is None
    bare = "\n".join(line.replace(" MiB", "") for line in header.splitlines()[1:])
    assert smi.parse_query_csv(bare) == rows  # noheader,nounits with the module's field order
    renamed = smi.parse_query_csv("NVIDIA H200, 9.0\n", fields=["name", "compute_cap"])
    assert renamed[0]["compute_capability"] == "9.0"  # no index column: row order


def test_csv_refuses_short_rows():
    with pytest.raises(smi.ParseError, match="has 2 fields, expected 6"):
        smi.parse_query_csv("0, NVIDIA H200\n")


def test_summary_joins_csv_by_pci_bus_id_whatever_the_domain_width():
    info = smi.parse_query_xml(XML)
    csv = {0: {"index": 0, "pci.bus_id": "0000:0C:00.0", "compute_cap": "12.0", "compute_capability": "12.0",
               "compute_capability_major": 12, "compute_capability_minor": 0}}
    topo = smi.parse_topo_matrix(TOPO)
    facts = smi.summarize(info, csv, topo, smi.parse_p2p_matrix(P2P))
    assert [g["compute_capability"] for g in facts["gpus"]] == [None, "12.0"]
    assert facts["compute_capabilities"] == ["12.0"] and facts["nvlink"] is True
    assert facts["all_p2p_ok"] is False and facts["p2p_statuses"] == ["CNS"]
    assert smi.inconsistencies(info, csv, topo, smi.parse_p2p_matrix(P2P)) == ["--query-gpu lists 1 GPUs, -q -x 2"]


def test_compute_capabilities_sort_numerically():
    info = {"driver_version": None, "cuda_version": None,
            "gpus": [{"index": i, "pci_bus_id": None} for i in range(3)]}
    csv = {i: {"compute_capability": cc} for i, cc in enumerate(["12.0", "9.0", "12.0"])}
    empty = {"gpus": [], "matrix": {}, "affinity": {}}
    assert smi.summarize(info, csv, empty, {})["compute_capabilities"] == ["9.0", "12.0"]
