#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/nvidia_smi.py (all parsing lives there)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_facts
short_description: Gather NVIDIA GPU facts (compute capability, PCIe, topology, P2P) from nvidia-smi
version_added: "0.1.0"
description:
  - Runs four read-only C(nvidia-smi) queries on the target and publishes what later roles decide on as the
    C(nvidia_gpu) fact; GPU model, driver and CUDA version, compute capability, PCIe link, the C(topo -m)
    link matrix with CPU/NUMA affinity, and the C(topo -p2p r) peer-to-peer read matrix.
  - "The queries: C(nvidia-smi -q -x); C(nvidia-smi --query-gpu=index,name,compute_cap,uuid,pci.bus_id,memory.total
    --format=csv) (the XML has no compute capability); C(nvidia-smi topo -m); C(nvidia-smi topo -p2p r)."
  - GPUs are numbered by nvidia-smi's index (the order of C(-q -x), the C(GPUn) labels of C(topo)); the device
    minor number is reported apart, it often differs.
  - Fails with a clear message, and no traceback, when C(nvidia-smi) is missing, when a query fails (its own
    message is returned) or when an output cannot be read.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  nvidia_smi:
    description:
      - The C(nvidia-smi) to run, a name looked up in PATH (and /sbin, /usr/sbin, /usr/local/sbin) or an absolute
        path, for example a stand-in in a container lab.
    type: path
    default: nvidia-smi
notes:
  - Changes nothing; supports check mode (the queries also run in check mode).
  - Needs only python3 and nvidia-smi on the target (the parsers use the standard library).
seealso:
  - name: nvidia-smi documentation
    description: NVIDIA's reference for the outputs this module parses.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Read the GPUs
  nvidia_gpu_facts:

- name: Refuse hosts that are not SM120
  ansible.builtin.assert:
    that: ansible_facts.nvidia_gpu.compute_capabilities == ['12.0']
    fail_msg: "expected RTX PRO 6000 Blackwell (12.0), found {{ ansible_facts.nvidia_gpu.compute_capabilities }}"

- name: Use a stand-in in a container lab
  nvidia_gpu_facts:
    nvidia_smi: /usr/local/bin/nvidia-smi
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: success
  type: dict
  contains:
    nvidia_gpu:
      description: The GPUs of the host, as nvidia-smi reports them.
      type: dict
      contains:
        driver_version: {description: NVIDIA driver version., type: str, sample: "580.159.04"}
        cuda_version: {description: Highest CUDA version the driver supports., type: str, sample: "13.0"}
        gpu_count: {description: Number of GPUs., type: int, sample: 2}
        gpus:
          description: >-
            One entry per GPU, in index order: index, name, uuid, pci_bus_id, minor_number, architecture,
            memory_total_mib, pcie (gen_current, gen_max, width_current, width_max as ints), mig_mode,
            persistence_mode, compute_capability (C("12.0")), compute_capability_major, compute_capability_minor,
            cpu_affinity, numa_affinity, gpu_numa_id (null where nvidia-smi says N/A or prints no column).
          type: list
          elements: dict
        compute_capabilities: {description: Sorted unique compute capabilities., type: list, elements: str,
                               sample: ["12.0"]}
        topology:
          description: >-
            C(topo -m) - gpus and nics (labels), nic_names (from the NIC Legend), matrix (row label to column label
            to link type, C(X) on the diagonal), affinity (per GPU label).
          type: dict
          sample: {"gpus": ["GPU0", "GPU1"], "nics": [], "nic_names": {},
                   "matrix": {"GPU0": {"GPU0": "X", "GPU1": "NV18"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}},
                   "affinity": {"GPU0": {"cpu_affinity": "0-31", "numa_affinity": "0", "gpu_numa_id": null}}}
        p2p:
          description: C(topo -p2p r) - GPU label to GPU label to OK, CNS, GNS, TNS, NS, DR or U (C(X) on the diagonal).
          type: dict
          sample: {"GPU0": {"GPU0": "X", "GPU1": "OK"}, "GPU1": {"GPU0": "OK", "GPU1": "X"}}
        link_types: {description: Sorted unique link types between GPUs., type: list, elements: str,
                     sample: ["NODE", "PIX", "SYS"]}
        p2p_statuses: {description: Sorted unique P2P statuses between GPUs., type: list, elements: str,
                       sample: ["OK"]}
        nvlink: {description: Whether any two GPUs are joined by NVLink (an NV# link)., type: bool}
        all_p2p_ok:
          description: Whether every pair of GPUs can read each other peer-to-peer (true for one GPU).
          type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import nvidia_smi
from ansible.module_utils import param_checks

QUERIES = (
    ("xml", ["-q", "-x"]),
    ("csv", ["--query-gpu=" + ",".join(nvidia_smi.QUERY_FIELDS), "--format=csv"]),
    ("topo", ["topo", "-m"]),
    ("p2p", ["topo", "-p2p", "r"]),
)
PARSERS = {"xml": nvidia_smi.parse_query_xml, "csv": nvidia_smi.parse_query_csv,
           "topo": nvidia_smi.parse_topo_matrix, "p2p": nvidia_smi.parse_p2p_matrix}

HOW_TO_FIX = ("nvidia-smi comes with the NVIDIA driver: install the driver and its utilities (e.g. the "
              "nvidia-driver-580-server and nvidia-utils-580-server packages on Ubuntu), or set nvidia_smi to "
              "the full path of nvidia-smi.")


def find_nvidia_smi(module, name):
    if os.sep in name:  # an explicit path: get_bin_path would join it to every PATH entry
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return module.get_bin_path(name)


def main():
    module = AnsibleModule(argument_spec=dict(nvidia_smi=dict(type="path", default="nvidia-smi")),
                           supports_check_mode=True)
    refused = param_checks.refusal("nvidia_gpu_facts", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    binary = find_nvidia_smi(module, module.params["nvidia_smi"])
    if binary is None:
        name = module.params["nvidia_smi"]
        where = ("%r is not an executable file" % name if os.sep in name else
                 "no %r in PATH, /sbin, /usr/sbin or /usr/local/sbin" % name)
        module.fail_json(msg="nvidia-smi not found on this host: %s. %s" % (where, HOW_TO_FIX), changed=False)

    parsed = {}
    for key, args in QUERIES:
        cmd = [binary] + args
        shown = " ".join(["nvidia-smi"] + args)
        rc, out, err = module.run_command(cmd)
        if rc != 0:  # nvidia-smi prints most of its errors on stdout
            module.fail_json(msg="`%s` failed (rc %d): %s" % (shown, rc, (err or out).strip() or "no output"),
                             cmd=cmd, rc=rc, stdout=out, stderr=err, changed=False)
        try:
            parsed[key] = PARSERS[key](out)
        except nvidia_smi.ParseError as exc:
            module.fail_json(msg="could not read the output of `%s`: %s" % (shown, exc), cmd=cmd, stdout=out,
                             changed=False)

    for problem in nvidia_smi.inconsistencies(parsed["xml"], parsed["csv"], parsed["topo"], parsed["p2p"]):
        module.warn(problem)
    facts = nvidia_smi.summarize(parsed["xml"], parsed["csv"], parsed["topo"], parsed["p2p"])
    module.exit_json(changed=False, ansible_facts={"nvidia_gpu": facts})


if __name__ == "__main__":
    main()
