# -*- coding: utf-8 -*-
"""Parse nvidia-smi outputs into GPU facts.

Pure and stdlib-only: it runs on target hosts that have nothing but python3.
Each parser takes the text one nvidia-smi command printed; summarize() joins them.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

# What the module asks --query-gpu for (the XML has no compute capability).
QUERY_FIELDS = ("index", "name", "compute_cap", "uuid", "pci.bus_id", "memory.total")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Header cells: the multi-word affinity columns first, so they stay one token when tabs were expanded.
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_HEADER_TOKEN = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|\S+")
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_DEVICE_LABEL = re.compile(r"^(GPU|NIC)\d+$")
# A header cell: "index", "memory.total [MiB]"; values carry capitals or digits first ("NVIDIA H200", "0").
_FIELD_NAME = re.compile(r"^[a-z_][a-z0-9_.]*( \[[^\]]+\])?$")
_UNIT = re.compile(r"^(-?\d+(?:\.\d+)?) (?:MiB|W|MHz|%|C)$")


class ParseError(ValueError):
    """The text is not the nvidia-smi output we expected."""


# ---------------------------------------------------------------- nvidia-smi -q -x

def _text(node, path):
    """Stripped text of a child element; None for missing, empty or N/A."""
    found = node.find(path) if node is not None else None
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A") else value


def _int(value):
    """'16x' -> 16, '143771 MiB' -> 143771, None/garbage -> None."""
    match = re.match(r"^\s*(\d+)", value or "")
    return int(match.group(1)) if match else None


def parse_query_xml(text):
    """`nvidia-smi -q -x` -> {driver_version, cuda_version, attached_gpus, gpus: [...]}.

    GPUs are indexed by document order, which is nvidia-smi's index (-i, topo GPUn, --query-gpu index).
    minor_number (the /dev/nvidiaN number) is kept apart: it often differs from the index.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ParseError("nvidia-smi -q -x did not print valid XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ParseError("nvidia-smi -q -x: expected <nvidia_smi_log>, got <%s>" % root.tag)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        link = gpu.find("pci/pci_gpu_link_info")
        gpus.append({
            "index": index,
            "name": _text(gpu, "product_name"),
            "uuid": _text(gpu, "uuid"),
            "pci_bus_id": _text(gpu, "pci/pci_bus_id") or gpu.get("id"),
            "minor_number": _int(_text(gpu, "minor_number")),
            "architecture": _text(gpu, "product_architecture"),
            "memory_total_mib": _int(_text(gpu, "fb_memory_usage/total")),
            "pcie": {
                "gen_current": _int(_text(link, "pcie_gen/current_link_gen")),
                "gen_max": _int(_text(link, "pcie_gen/max_link_gen")),
                "width_current": _int(_text(link, "link_widths/current_link_width")),
                "width_max": _int(_text(link, "link_widths/max_link_width")),
            },
            "mig_mode": _text(gpu, "mig_mode/current_mig"),
            "persistence_mode": _text(gpu, "persistence_mode"),
        })
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _int(_text(root, "attached_gpus")),
        "gpus": gpus,
    }


# ---------------------------------------------------------------- --query-gpu=... --format=csv

def _csv_value(value):
    value = value.strip()
    if value in ("", "N/A") or value.startswith("["):  # [N/A], [Not Supported], [Unknown Error]
        return None
    match = _UNIT.match(value)  # "143771 MiB" without nounits
    return match.group(1) if match else value


def parse_query_csv(text, fields=QUERY_FIELDS):
    """`--query-gpu=... --format=csv[,noheader][,nounits]` -> {index: row}.

    Uses the header's field names when present (units like " [MiB]" dropped), else `fields`.
    A compute_cap column adds compute_capability ("12.0") and its _major/_minor ints.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and all(_FIELD_NAME.match(cell.strip()) for cell in lines[0].split(",")):
        fields = [cell.strip().split(" [")[0] for cell in lines.pop(0).split(",")]
    rows = {}
    for number, line in enumerate(lines):
        cells = [_csv_value(cell) for cell in line.split(",")]
        if len(cells) != len(fields):  # names in nvidia-smi never hold commas
            raise ParseError("--query-gpu csv line %d has %d fields, expected %d (%s): %r"
                             % (number + 1, len(cells), len(fields), ", ".join(fields), line))
        row = dict(zip(fields, cells))
        index = _int(row.get("index")) if "index" in row else number
        if index is None:
            raise ParseError("--query-gpu csv line %d: index %r is not a number" % (number + 1, row["index"]))
        row["index"] = index
        if "compute_cap" in row:
            row.update(_compute_capability(row["compute_cap"]))
        rows[index] = row
    return rows


def _compute_capability(value):
    match = re.match(r"^(\d+)\.(\d+)$", value or "")
    if not match:
        return {"compute_capability": None, "compute_capability_major": None, "compute_capability_minor": None}
    return {"compute_capability": value, "compute_capability_major": int(match.group(1)),
            "compute_capability_minor": int(match.group(2))}


# ---------------------------------------------------------------- topo -m / topo -p2p

def _is_header(tokens):
    """The header starts with GPU0-like label and goes on with labels or affinity columns (a row has X next)."""
    if not tokens or not _GPU_LABEL.match(tokens[0]):
        return False
    return len(tokens) == 1 or bool(_DEVICE_LABEL.match(tokens[1])) or tokens[1] in _AFFINITY_COLUMNS


def _read_matrix(text, what):
    """Common part of topo -m and -p2p: (devices, extra header columns, {label: cells}, lines after)."""
    lines = _ANSI.sub("", text).splitlines()
    for start, line in enumerate(lines):
        tokens = _HEADER_TOKEN.findall(line)
        if _is_header(tokens):
            break
    else:
        raise ParseError("%s: no header line with GPU0 found" % what)
    columns = tokens
    extra_at = next((i for i, col in enumerate(columns) if col in _AFFINITY_COLUMNS), len(columns))
    devices, extra = columns[:extra_at], columns[extra_at:]
    rows = {}
    end = start + 1
    while end < len(lines):
        cells = lines[end].split()  # cells never hold spaces; split() also drops the empty tab cells
        if not cells or cells[0] not in devices:
            break  # blank line or Legend: the matrix is over
        if len(cells) < 1 + len(devices):
            raise ParseError("%s: row %s has %d cells, expected %d" % (
                what, cells[0], len(cells) - 1, len(devices)))
        rows[cells[0]] = cells[1:]
        end += 1
    missing = [label for label in devices if label.startswith("GPU") and label not in rows]
    if missing:
        raise ParseError("%s: no row for %s" % (what, ", ".join(missing)))
    return devices, extra, rows, lines[end:]


def _nic_names(lines):
    """'NIC Legend:' entries ('  NIC0: rocep49s0') -> {'NIC0': 'rocep49s0'}."""
    names = {}
    for line in lines:
        match = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if match:
            names[match.group(1)] = match.group(2)
    return names


def parse_topo_matrix(text):
    """`nvidia-smi topo -m` -> {gpus, nics, nic_names, matrix, affinity}.

    matrix: {"GPU0": {"GPU0": "X", "GPU1": "NV18", "NIC0": "NODE"}, ...} for every row (GPUs and NICs).
    affinity: {"GPU0": {"cpu_affinity": "0-31", "numa_affinity": "0", "gpu_numa_id": None}} where the
    columns exist (pasted or trimmed variants drop them).
    """
    devices, extra, rows, rest = _read_matrix(text, "nvidia-smi topo -m")
    keys = [col.lower().replace(" ", "_") for col in extra]
    matrix, affinity = {}, {}
    for label, cells in rows.items():
        matrix[label] = dict(zip(devices, cells[:len(devices)]))
        values = cells[len(devices):]
        if label.startswith("GPU") and keys:
            affinity[label] = {key: (values[i] if i < len(values) and values[i] != "N/A" else None)
                               for i, key in enumerate(keys)}
    return {
        "gpus": [d for d in devices if d.startswith("GPU")],
        "nics": [d for d in devices if not d.startswith("GPU")],
        "nic_names": _nic_names(rest),
        "matrix": matrix,
        "affinity": affinity,
    }


def parse_p2p_matrix(text):
    """`nvidia-smi topo -p2p r` (or w, rw, n, a) -> {"GPU0": {"GPU0": "X", "GPU1": "OK"}, ...}."""
    devices, _extra, rows, _rest = _read_matrix(text, "nvidia-smi topo -p2p")
    return {label: dict(zip(devices, cells[:len(devices)])) for label, cells in rows.items()}


# ---------------------------------------------------------------- facts

def _pci_key(bus_id):
    """'00000000:00:06.0' and '0000:00:06.0' compare equal (domain width varies between tools)."""
    match = re.match(r"^([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])$", (bus_id or "").strip())
    return tuple(int(part, 16) for part in match.groups()) if match else None


def _off_diagonal(matrix, gpus):
    return [matrix.get(a, {}).get(b) for a in gpus for b in gpus if a != b]


def summarize(xml_info, csv_rows, topo, p2p):
    """The nvidia_gpu fact from the four parsed outputs.

    CSV rows join the XML GPUs by PCI bus id (index as fallback); topology by "GPU<index>".
    all_p2p_ok is true when every GPU pair reads OK (vacuously for one GPU, never for none).
    """
    by_bus = {_pci_key(row.get("pci.bus_id")): row for row in csv_rows.values()}
    by_bus.pop(None, None)
    gpus = []
    for xml_gpu in xml_info["gpus"]:
        row = by_bus.get(_pci_key(xml_gpu["pci_bus_id"]))
        if row is None:  # by index only where the CSV has no bus id: a row with another GPU's bus id is not ours
            row = csv_rows.get(xml_gpu["index"]) or {}
            row = row if _pci_key(row.get("pci.bus_id")) is None else {}
        gpu = dict(xml_gpu)
        gpu.update({key: row.get(key) for key in
                    ("compute_capability", "compute_capability_major", "compute_capability_minor")})
        gpu.update({"cpu_affinity": None, "numa_affinity": None, "gpu_numa_id": None})  # same keys when trimmed
        gpu.update(topo["affinity"].get("GPU%d" % xml_gpu["index"], {}))
        gpus.append(gpu)
    labels = topo["gpus"]
    links = _off_diagonal(topo["matrix"], labels)
    statuses = _off_diagonal(p2p, labels)
    return {
        "driver_version": xml_info["driver_version"],
        "cuda_version": xml_info["cuda_version"],
        "gpu_count": len(gpus),
        "gpus": gpus,
        "compute_capabilities": sorted({g["compute_capability"] for g in gpus if g["compute_capability"]},
                                       key=lambda cc: tuple(int(p) for p in cc.split("."))),
        "topology": topo,
        "p2p": p2p,
        "link_types": sorted({link for link in links if link}),
        "p2p_statuses": sorted({status for status in statuses if status}),
        "nvlink": any(re.match(r"^NV\d+$", link or "") for link in links),
        "all_p2p_ok": bool(gpus) and all(status == "OK" for status in statuses),
    }


def inconsistencies(xml_info, csv_rows, topo, p2p):
    """Disagreements between the outputs (GPU counts, labels): warnings, not failures."""
    problems = []
    count = len(xml_info["gpus"])
    if xml_info.get("attached_gpus") not in (None, count):
        problems.append("-q -x says %s attached GPUs but lists %d" % (xml_info["attached_gpus"], count))
    for what, found in (("--query-gpu", len(csv_rows)), ("topo -m", len(topo["gpus"])),
                        ("topo -p2p", len([k for k in p2p if k.startswith("GPU")]))):
        if found != count:
            problems.append("%s lists %d GPUs, -q -x %d" % (what, found, count))
    return problems
