#!/usr/bin/env python3
"""Build the h200-2x-nvlink GPU profile for the nvidia-smi stand-in from the shared H200 capture.

The capture lives outside the repo (<repo>/../shared/fixtures/gpu/h200x2-nvlink/) and is not committed here, so
the profile is made when needed, into lab/gpu-profiles/h200-2x-nvlink/ (git-ignored) by default:

    lab/make-h200-profile.py [--source DIR] [--out DIR]

Files are copied byte for byte, except query-gpu.csv: the captured query had no uuid column, which the module's
query asks for, so uuid is added from the XML (matched by PCI bus id). Python 3 standard library only.
"""
import argparse
import os
import shutil
import sys
import xml.etree.ElementTree as ET

LAB = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(os.path.dirname(LAB), "..", "shared", "fixtures", "gpu", "h200x2-nvlink")
COPIES = {"nvidia-smi_-q_-x.xml": "q-x.xml", "nvidia-smi_topo_-m.txt": "topo-m.txt",
          "nvidia-smi_topo_-p2p_r.txt": "topo-p2p-r.txt", "nvidia-smi.txt": "nvidia-smi.txt"}


def csv_with_uuid(csv_text, xml_text):
    uuids = {gpu.findtext("pci/pci_bus_id").strip(): gpu.findtext("uuid").strip()
             for gpu in ET.fromstring(xml_text).findall("gpu")}
    lines = [line for line in csv_text.splitlines() if line.strip()]
    header = [cell.strip() for cell in lines[0].split(",")]
    bus = header.index("pci.bus_id")
    at = header.index("compute_cap") + 1 if "compute_cap" in header else len(header)
    out = [", ".join(header[:at] + ["uuid"] + header[at:])]
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split(",")]
        out.append(", ".join(cells[:at] + [uuids[cells[bus]]] + cells[at:]))
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=os.path.normpath(SOURCE))
    parser.add_argument("--out", default=os.path.join(LAB, "gpu-profiles", "h200-2x-nvlink"))
    args = parser.parse_args()
    if not os.path.isdir(args.source):
        sys.exit("make-h200-profile: no H200 capture at %s (it is shared data outside the repo)" % args.source)
    os.makedirs(args.out, exist_ok=True)
    for name, target in COPIES.items():
        shutil.copyfile(os.path.join(args.source, name), os.path.join(args.out, target))
    with open(os.path.join(args.source, "nvidia-smi_query-gpu.csv"), encoding="utf-8") as csv, \
            open(os.path.join(args.source, "nvidia-smi_-q_-x.xml"), encoding="utf-8") as xml:
        text = csv_with_uuid(csv.read(), xml.read())
    with open(os.path.join(args.out, "query-gpu.csv"), "w", encoding="utf-8") as handle:
        handle.write(text)
    print("h200-2x-nvlink profile written to %s" % args.out)


if __name__ == "__main__":
    main()
