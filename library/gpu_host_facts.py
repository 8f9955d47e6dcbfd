#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/host_probe.py (all parsing lives there)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_host_facts
short_description: Read what GPU preflight checks on a host besides its GPUs, in one module run
version_added: "0.1.0"
description:
  - Reads, in one run on the target, the version of the Python for the venvs, the version of the first C(nvcc) found,
    the free space under each of a list of paths, the PCIe ACS control state of the ports (C(lspci -vvv)) and the
    number of IOMMU groups. gpu_preflight decides on them; this module decides nothing.
  - "Python: runs I(python) with C(-c) and a line of code that prints C(sys.version_info[:3]) as C(X.Y.Z). A Python
    that is missing, fails or prints something else is not a failure of the module: I(python_version) is empty and
    I(python_error) says why."
  - "nvcc: the first of I(nvcc_paths) that is an executable file (an absolute path) or found in PATH (a bare name),
    and the first C(release X.Y) of its C(--version) output. An empty list skips nvcc."
  - "Free disk: each of I(disk_paths), or its nearest existing parent (the directory a deploy would create it in),
    and the space available there to unprivileged users in KiB, as C(df -Pk) reports it."
  - "ACS: the C(ACSCtl:) lines of C(lspci -vvv), and among them those with C(ReqRedir+) or C(CmpltRedir+)
    (redirection sends peer-to-peer traffic through the root complex). No C(lspci) is reported, not a failure."
  - Fails with a clear message, and no traceback, on a disk path that is not absolute or whose free space cannot
    be read.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  python:
    description:
      - The Python to read the version of, a name looked up in PATH or an absolute path. Left out, no Python is
        run and I(python_version) is empty.
    type: path
  nvcc_paths:
    description:
      - Where to look for C(nvcc), in order; absolute paths or names looked up in PATH (and /sbin, /usr/sbin,
        /usr/local/sbin). The first one found is run, whatever its output.
      - An empty list skips nvcc (a host that does not need it).
    type: list
    elements: str
    default: []
  disk_paths:
    description:
      - Absolute paths to measure the free space for; a path that does not exist yet is measured at its nearest
        existing parent.
    type: list
    elements: str
    default: []
  iommu_groups_dir:
    description: Where the kernel lists the IOMMU groups, one directory each.
    type: path
    default: /sys/kernel/iommu_groups
notes:
  - Changes nothing; supports check mode (everything is read in check mode too).
  - Needs only python3 on the target; C(lspci) (pciutils) for the ACS state.
seealso:
  - module: gpufleet.sglang.nvidia_gpu_facts
"""

EXAMPLES = r"""
- name: "Read the host: Python, nvcc, free disk, ACS, IOMMU groups"
  gpu_host_facts:
    python: /usr/bin/python3
    nvcc_paths: [/usr/local/cuda/bin/nvcc, nvcc]
    disk_paths: [/opt/sglang]
  register: probe

- name: Require Python 3.10+
  ansible.builtin.assert:
    that: probe.host.python_version is version('3.10', '>=')
    fail_msg: "python3: {{ probe.host.python_version or probe.host.python_error }}"
"""

RETURN = r"""
host:
  description: What was read.
  returned: success
  type: dict
  contains:
    python_version: {description: Version of I(python) (C(major.minor.micro)); empty when it could not be read.,
                     type: str, sample: "3.12.3"}
    python_error:
      description: >-
        Why I(python_version) is empty (C(not found), C(cannot run it: ...), C(exits with rc N: ...), C(printed ...,
        not a version)); null when it was read or no I(python) was given.
      type: str
      sample: not found
    nvcc_version: {description: Version of the nvcc found (C(release X.Y)); empty when none was found or none was asked
                                for or its output names no release., type: str, sample: "12.8"}
    nvcc_path: {description: The nvcc found and run; null when none., type: str, sample: /usr/local/cuda/bin/nvcc}
    nvcc_error: {description: Why the nvcc found could not be run; null otherwise., type: str}
    disk:
      description: One entry per I(disk_paths), in order.
      type: list
      elements: dict
      contains:
        path: {description: The path asked for., type: str, sample: /opt/sglang}
        checked_path:
          description: The path itself or its nearest existing parent, where the space was read.
          type: str
          sample: /opt
        free_kb: {description: KiB available to unprivileged users there (C(df -Pk) Available)., type: int,
                  sample: 104857600}
    acs:
      description: PCIe ACS control state from C(lspci -vvv).
      type: dict
      contains:
        lspci: {description: Whether lspci is installed (false - the counts are 0)., type: bool}
        ports_with_acs: {description: Ports with an ACS control (C(ACSCtl:) lines)., type: int, sample: 12}
        ports_redirecting:
          description: Of those, the ports redirecting requests or completions (C(ReqRedir+) or C(CmpltRedir+)).
          type: int
          sample: 0
    iommu_groups: {description: IOMMU groups (directories in I(iommu_groups_dir)); 0 when it is missing., type: int,
                   sample: 84}
"""

import errno
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import host_probe
from ansible.module_utils import param_checks


def find_binary(module, name):
    """An absolute path when it is an executable file, else the name looked up in PATH; None when not found
    (bash's ``command -v`` for a command)."""
    if not name:
        return None
    if os.sep in name:  # an explicit path: get_bin_path would join it to every PATH entry
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return module.get_bin_path(name)


def read_python(module, python):
    """(version, error) of the Python for the venvs; never fails the module."""
    try:
        rc, out, err = module.run_command([python, "-c", host_probe.PYTHON_VERSION_CODE], expand_user_and_vars=False,
                                          handle_exceptions=False)
    except OSError as exc:
        return "", "not found" if exc.errno == errno.ENOENT else "cannot run it: %s" % exc
    return host_probe.python_version(rc, out, err)


def read_nvcc(module, candidates):
    """{nvcc_version, nvcc_path, nvcc_error} of the first candidate found; its exit status is not judged (the
    version is what counts)."""
    for candidate in candidates:
        found = find_binary(module, candidate)
        if found is None:
            continue
        try:
            _rc, out, _err = module.run_command([found, "--version"], expand_user_and_vars=False,
                                                handle_exceptions=False)
        except OSError as exc:
            return {"nvcc_version": "", "nvcc_path": found, "nvcc_error": "cannot run it: %s" % exc}
        return {"nvcc_version": host_probe.nvcc_version(out), "nvcc_path": found, "nvcc_error": None}
    return {"nvcc_version": "", "nvcc_path": None, "nvcc_error": None}


def read_lspci(module):
    """``lspci -vvv`` output, whatever its exit status (it prints what it can read); None without lspci."""
    lspci = module.get_bin_path("lspci")
    if lspci is None:
        return None
    try:
        _rc, out, _err = module.run_command([lspci, "-vvv"], expand_user_and_vars=False, handle_exceptions=False)
    except OSError:
        return None
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path"),
            nvcc_paths=dict(type="list", elements="str", default=[]),
            disk_paths=dict(type="list", elements="str", default=[]),
            iommu_groups_dir=dict(type="path", default="/sys/kernel/iommu_groups"),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("gpu_host_facts", module.argument_spec, module.params, extra=("nvcc_paths", "disk_paths"))
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    relative = [path for path in params["disk_paths"] if not path.startswith("/")]
    if relative:
        module.fail_json(msg="disk_paths must be absolute paths, got %s" % ", ".join(repr(path) for path in relative),
                         changed=False)

    disk = []
    for path in params["disk_paths"]:
        try:
            disk.append(host_probe.disk_free(path))
        except OSError as exc:
            module.fail_json(msg="cannot read the free space for %s (at %s): %s"
                             % (path, host_probe.nearest_existing(path), exc), changed=False)

    python_version, python_error = (read_python(module, params["python"]) if params["python"] else ("", None))
    host = {"python_version": python_version, "python_error": python_error}
    host.update(read_nvcc(module, params["nvcc_paths"]))
    host["disk"] = disk
    host["acs"] = host_probe.summarize_acs(read_lspci(module))
    host["iommu_groups"] = host_probe.count_iommu_groups(params["iommu_groups_dir"])
    module.exit_json(changed=False, host=host)


if __name__ == "__main__":
    main()
