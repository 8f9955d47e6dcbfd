#!/usr/bin/env python3
"""nvidia-smi as a shared-GPU rehearsal's roles see it: the machine's one GPU shown once per rank.

A REHEARSAL stand-in, test bed only (sglang_e2e.py points gpu_preflight_nvidia_smi at it when E2E_SHARED_GPU_RANKS
is set): the roles then run as on a host with RANKS GPUs (preflight allows fusion, the canary and the units get
that many ranks), while every rank really shares GPU 0. It runs the real nvidia-smi and rewrites only the four
answers nvidia_gpu_facts asks for; anything else passes through unchanged.
  -q -x            GPU 0's element repeated, each copy with its own index-derived PCI bus id, minor number and UUID
  --query-gpu=...  GPU 0's row repeated the same way
  topo -m          a RANKS x RANKS matrix, SYS between ranks (they meet over loopback sockets, no GPU link), each
                   row with GPU 0's CPU and NUMA affinity
  topo -p2p r      OK between ranks (one GPU reaches its own memory)
Nothing here is evidence about two GPUs; scripts/device/README.md says what the rehearsal proves.

    shared_gpu_nvidia_smi.py --ranks N [--nvidia-smi PATH] -- ARGS...
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
# the roles' own parser: beside this file where sglang_e2e.py installed it for the service user, else the checkout's
sys.path.insert(0, next(path for path in (os.path.join(HERE, "module_utils"),
                                          os.path.join(os.path.dirname(os.path.dirname(HERE)), "module_utils"))
                        if os.path.isdir(path)))
import nvidia_smi  # noqa: E402  pylint: disable=wrong-import-position


def bus_id(original, rank):
    """GPU 0's PCI bus id with its device number moved by RANK (unique, same format)."""
    match = re.match(r"^([0-9A-Fa-f]+):([0-9A-Fa-f]+):([0-9A-Fa-f]+)\.([0-7])$", original.strip())
    if not match:
        raise ValueError("unexpected PCI bus id %r" % original)
    domain, bus, device, function = match.groups()
    return "%s:%s:%0*X.%s" % (domain, bus, len(device), (int(device, 16) + rank) % 32, function)


def uuid(original, rank):
    return original if rank == 0 else "%s-rank%d" % (original, rank)


def query_xml(text, ranks):
    root = ET.fromstring(text)
    gpus = root.findall("gpu")
    if len(gpus) != 1:
        raise ValueError("a shared-GPU rehearsal needs a one-GPU machine; nvidia-smi lists %d" % len(gpus))
    first = gpus[0]
    original = first.findtext("pci/pci_bus_id") or first.get("id")
    for rank in range(1, ranks):
        gpu = copy.deepcopy(first)
        gpu.set("id", bus_id(first.get("id"), rank))
        for path, value in (("pci/pci_bus_id", bus_id(original, rank)), ("minor_number", str(rank)),
                            ("uuid", uuid(first.findtext("uuid"), rank))):
            node = gpu.find(path)
            if node is not None:
                node.text = value
        root.insert(list(root).index(first) + rank, gpu)
    attached = root.find("attached_gpus")
    if attached is not None:
        attached.text = str(ranks)
    return ET.tostring(root, encoding="unicode") + "\n"


def query_csv(text, ranks):
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0] if lines and "index" in lines[0] else None
    rows = lines[1:] if header else lines
    if len(rows) != 1:
        raise ValueError("a shared-GPU rehearsal needs a one-GPU machine; nvidia-smi lists %d" % len(rows))
    names = [cell.strip().split(" [")[0] for cell in header.split(",")] if header else list(nvidia_smi.QUERY_FIELDS)
    out = [header] if header else []
    for rank in range(ranks):
        cells = [cell.strip() for cell in rows[0].split(",")]
        for column, name in enumerate(names):
            if name == "index":
                cells[column] = str(rank)
            elif name == "pci.bus_id":
                cells[column] = bus_id(cells[column], rank)
            elif name == "uuid":
                cells[column] = uuid(cells[column], rank)
        out.append(", ".join(cells))
    return "\n".join(out) + "\n"


def matrix(text, ranks, link, what):
    """A RANKS x RANKS matrix in nvidia-smi's layout, LINK between ranks; topo -m keeps GPU 0's affinity columns."""
    parsed = nvidia_smi.parse_topo_matrix(text) if what == "topo" else None
    labels = ["GPU%d" % rank for rank in range(ranks)]
    affinity = (parsed or {}).get("affinity", {}).get("GPU0") or {}
    extra = {"cpu_affinity": "CPU Affinity", "numa_affinity": "NUMA Affinity", "gpu_numa_id": "GPU NUMA ID"}
    columns = [key for key in extra if key in affinity]
    lines = ["\t" + "\t".join(labels + [extra[key] for key in columns])]
    for row in labels:
        cells = [" X " if row == col else link for col in labels]
        lines.append("\t".join([row] + cells + [affinity[key] or "N/A" for key in columns]))
    return "\n".join(lines) + "\n\nLegend:\n\n  X    = Self\n  SYS  = shared-GPU rehearsal: ranks meet over sockets" \
                              "\n  OK   = Status Ok\n"


def view(argv, output, ranks):
    """The rehearsal's answer to nvidia-smi ARGV, given the real OUTPUT."""
    if argv[:2] == ["-q", "-x"]:
        return query_xml(output, ranks)
    if argv and argv[0].startswith("--query-gpu="):
        return query_csv(output, ranks)
    if argv[:2] == ["topo", "-m"]:
        return matrix(output, ranks, "SYS", "topo")
    if argv[:2] == ["topo", "-p2p"]:
        return matrix(output, ranks, "OK", "p2p")
    return output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if not 2 <= args.ranks <= 8:
        parser.error("--ranks must lie in 2..8")
    argv = args.args[1:] if args.args[:1] == ["--"] else args.args
    real = subprocess.run([args.nvidia_smi] + argv, capture_output=True, text=True, check=False)
    if real.returncode:
        sys.stderr.write(real.stderr)
        sys.stdout.write(real.stdout)
        return real.returncode
    sys.stdout.write(view(argv, real.stdout, args.ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
