#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/deploy_metrics.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_deploy_metrics
short_description: Write what the deployment decided on a host as a node_exporter textfile
version_added: "0.1.0"
description:
  - Writes a Prometheus textfile (text exposition format) for node_exporter's textfile collector with the releases,
    lock and model revision (C(sglang_deploy_info)), whether the server runs fused, the all-reduce path, the benchmark
    gate's last verdict and figures (read from its recorded verdict), the restarts and rollbacks (counted from
    sglang_server's restarts log, as counters that never go down) and the times of the last deploy and drift check.
  - A fact left unset here is kept from the textfile already there; one never known is left out, never written as 0.
  - The file is replaced atomically (a temporary file in the same folder, then a rename), and only when a fact other
    than the deploy and drift-check times changed, so a run that changes nothing reports no change.
  - Every file read (the old textfile, the verdict, the restarts log) is read only as a regular file, never through
    a symlink, never a FIFO or device.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  path:
    description: The textfile, in node_exporter's textfile folder (it must exist); its name must end in C(.prom).
      Run as root, that folder and every one above it must be root's and not group- or world-writable, or nothing
      is written.
    type: path
    required: true
  info:
    description: The releases, lock and model revision (C(sglang_version), C(flashinfer_version), C(lock),
      C(model_revision), all text). Unset keeps the recorded ones, unless O(venv) and O(model_path) are given.
    type: dict
  venv:
    description: The server's venv (sglang_layout_current); the SGLang and FlashInfer releases are read from its
      installed metadata and the lock is the name of the folder it resolves to. With O(model_path), in place of
      O(info); a package it does not hold is labelled C(none).
    type: path
  model_path:
    description: The server's model path; the model revision is the name of the folder it resolves to (the
      revision a C(current) link points at).
    type: path
  unit_file:
    description: The server's systemd unit; fused is 1 when it passes a fusion flag to more than one rank (every
      start of such a unit is proven fused or fails). In place of O(fused).
    type: path
  allreduce_path:
    description: The all-reduce path the deploy chose. Unset keeps the recorded one.
    type: str
  fused:
    description: Whether the server's last proven start ran fused (the fusion proof's answer). Unset keeps it.
    type: bool
  gate_verdict_file:
    description: The benchmark gate's recorded verdict (sglang_layout_gate_verdict); none there leaves the gate's
      series as recorded.
    type: path
  restarts_log:
    description: sglang_server's restarts log (sglang_layout_restarts_log), counted for the two counters.
    type: path
  deployed_at:
    description: When the deploy converged the host (Unix seconds or an ISO 8601 time with its offset).
    type: raw
  drift_checked_at:
    description: When a drift check checked the host (Unix seconds or an ISO 8601 time with its offset).
    type: raw
"""

EXAMPLES = r"""
- name: Publish what the deploy decided
  sglang_deploy_metrics:
    path: /var/lib/prometheus/node-exporter/sglang_deploy.prom
    info:
      sglang_version: 0.5.17
      flashinfer_version: 0.6.18
      lock: sm120-0.5.17
      model_revision: 6f1c2e0
    allreduce_path: fusion-trtllm
    fused: true
    gate_verdict_file: /var/lib/sglang-deploy/gate-verdict.json
    restarts_log: /var/lib/sglang-deploy/restarts.log
    deployed_at: "{{ now(utc=true).isoformat() ~ '+00:00' }}"

- name: The same, read from what the host runs
  sglang_deploy_metrics:
    path: /var/lib/prometheus/node-exporter/sglang_deploy.prom
    venv: /opt/sglang/current
    model_path: /var/lib/sglang-models/kimi-k2.5/current
    unit_file: /etc/systemd/system/sglang.service
    allreduce_path: fusion
    gate_verdict_file: /var/lib/sglang-deploy/gate-verdict.json
    restarts_log: /var/lib/sglang-deploy/restarts.log
"""

RETURN = r"""
facts:
  description: The facts the textfile holds now (or would, in check mode).
  returned: always
  type: dict
text:
  description: The textfile's content.
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import atomic_files
from ansible.module_utils import deploy_metrics
from ansible.module_utils import gate_verdict
from ansible.module_utils import param_checks
from ansible.module_utils import pkg_versions
from ansible.module_utils import root_trust


def _read(module, path):
    if not path:
        return None
    try:
        return atomic_files.read_regular(path)
    except atomic_files.RecordError as exc:
        module.fail_json(msg="sglang_deploy_metrics: %s; nothing written" % exc)


def _time(module, value, name):
    if value is None:
        return None
    seconds = deploy_metrics.timestamp(value)
    if seconds is None:
        module.fail_json(msg="sglang_deploy_metrics: %s must be Unix seconds or an ISO 8601 time with its offset, "
                             "got %r; nothing written" % (name, value))
    return seconds


def _info(module, venv, model_path):
    """The info labels read from the venv and the model path."""
    sites = pkg_versions.site_packages_dirs(venv)
    if not sites:
        module.fail_json(msg="sglang_deploy_metrics: %s has no site-packages (is it a venv?); nothing written" % venv)
    versions = {}
    for site in sites:
        for name, found in pkg_versions.installed_versions(site).items():
            versions.setdefault(name, []).extend(found)
    try:
        return deploy_metrics.release_info(versions, os.path.basename(os.path.realpath(venv)),
                                           os.path.basename(os.path.realpath(model_path.rstrip("/"))))
    except deploy_metrics.MetricsError as exc:
        module.fail_json(msg="sglang_deploy_metrics: %s (venv %s, model %s); nothing written" % (exc, venv, model_path))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            info=dict(type="dict"),
            allreduce_path=dict(type="str"),
            fused=dict(type="bool"),
            gate_verdict_file=dict(type="path"),
            restarts_log=dict(type="path"),
            deployed_at=dict(type="raw"),
            drift_checked_at=dict(type="raw"),
            venv=dict(type="path"),
            model_path=dict(type="path"),
            unit_file=dict(type="path"),
        ),
        required_together=[("venv", "model_path")],
        mutually_exclusive=[("info", "venv"), ("fused", "unit_file")],
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_deploy_metrics", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    if not p["path"].endswith(".prom") or not os.path.isdir(os.path.dirname(os.path.abspath(p["path"]))):
        module.fail_json(msg="sglang_deploy_metrics: path %s must end in .prom (node_exporter reads no other name) "
                             "in a folder that exists; nothing written" % p["path"])
    # Root reads the old file (its counters) and replaces it: only where no other user can write, up to /.
    problem = root_trust.chain_problem(os.path.dirname(os.path.abspath(p["path"]))) if os.geteuid() == 0 else None
    if problem:
        module.fail_json(msg="sglang_deploy_metrics: %s; root writes the textfile only in a folder that only root can "
                             "write, every folder above it too (make it root's and not group- or world-writable, or "
                             "point node_exporter and sglang_metrics_textfile_dir at one that is); nothing written"
                             % problem)
    old_text = _read(module, p["path"])
    new = dict(info=p["info"], allreduce_path=p["allreduce_path"],
               fused=None if p["fused"] is None else int(p["fused"]),
               last_deploy_timestamp_seconds=_time(module, p["deployed_at"], "deployed_at"),
               last_drift_check_timestamp_seconds=_time(module, p["drift_checked_at"], "drift_checked_at"))
    if p["venv"]:
        new["info"] = _info(module, p["venv"], p["model_path"])
    if p["unit_file"]:
        unit = _read(module, p["unit_file"])
        if unit is None:
            module.fail_json(msg="sglang_deploy_metrics: the unit %s does not exist; nothing written" % p["unit_file"])
        try:
            new["fused"] = deploy_metrics.fused_from_unit(unit)
        except deploy_metrics.MetricsError as exc:
            module.fail_json(msg="sglang_deploy_metrics: %s (%s); nothing written" % (exc, p["unit_file"]))
    if p["gate_verdict_file"]:
        verdict, problem = gate_verdict.parse(_read(module, p["gate_verdict_file"]))
        if problem:
            module.warn("sglang_deploy_metrics: %s (%s): the gate's series stay as recorded"
                        % (problem, p["gate_verdict_file"]))
        new.update(deploy_metrics.gate_facts(verdict))
    if p["restarts_log"]:
        new["restarts_total"], new["rollbacks_total"] = deploy_metrics.count_restarts(_read(module, p["restarts_log"]))
    facts = deploy_metrics.merge(deploy_metrics.parse(old_text), new)
    try:
        text = deploy_metrics.render(facts)
    except deploy_metrics.MetricsError as exc:
        module.fail_json(msg="sglang_deploy_metrics: %s; nothing written" % exc)
    changed = deploy_metrics.differs(old_text, text)
    if not changed:
        text = old_text
    result = dict(changed=changed, facts=deploy_metrics.parse(text), text=text)
    if module._diff and changed:
        result["diff"] = atomic_files.record_diff(p["path"], old_text, text)
    if changed and not module.check_mode:
        try:
            atomic_files.write_atomic(p["path"], text.encode("utf-8"), mode=0o644)
        except (OSError, atomic_files.TransactionError) as exc:
            module.fail_json(msg="sglang_deploy_metrics: writing %s failed: %s (the old file is unchanged)"
                                 % (p["path"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
