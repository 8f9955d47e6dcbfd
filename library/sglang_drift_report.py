#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/drift_report.py (runs on the controller)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_drift_report
short_description: Turn a check-mode run of the drift playbook into a verdict per host, with report files
version_added: "0.1.0"
description:
  - Reads what the C(ansible.posix.json) stdout callback printed for a C(--check --diff) run of the drift playbook
    (C(gpufleet.sglang.drift), or C(playbooks/drift.yml) in a checkout) and judges each host clean, drift, error or
    unreachable; every drift item has a category (patch, packages, nccl, environment, unit, service, venv, driver,
    other) set where it was produced, never read from task names.
  - The playbook C(gpufleet.sglang.drift_check) (C(playbooks/drift_check.yml) in a checkout) runs the drift
    playbook as a dry run with the callback, then this module, in one command.
  - Writes the JSON report, a Prometheus textfile (node_exporter) and a timestamped report in a folder (keeping
    the newest), each atomically. The verdict is returned, not raised (drift is a result, not a failure).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  src:
    description: The callback's output (a file on the controller).
    type: path
    required: true
  json:
    description: Write the JSON report here.
    type: path
  prom:
    description: Write the Prometheus textfile here.
    type: path
  report_dir:
    description: Write a drift-<UTC time>.json report into this folder, then keep only the I(keep) newest.
    type: path
  keep:
    description: Reports kept in I(report_dir).
    type: int
    default: 30
  summary:
    description: Write the text summary (one line per host, then each item) here.
    type: path
  diff_lines:
    description: Diff lines per item (0 for all).
    type: int
    default: 20
notes:
  - Supports check mode (judges and returns the verdict, writes no file). Run it on the controller (delegate_to
    localhost).
"""

EXAMPLES = r"""
# In one command, the dry run and this module: ansible-playbook -i <inventory> gpufleet.sglang.drift_check
# By hand, after ANSIBLE_STDOUT_CALLBACK=ansible.posix.json ansible-playbook gpufleet.sglang.drift --check --diff
# -i <inventory> > /tmp/drift-run.json:
- name: Judge a drift run
  gpufleet.sglang.sglang_drift_report:
    src: /tmp/drift-run.json
    json: /tmp/drift-latest.json
  delegate_to: localhost
  register: drift

- name: Judge the last scheduled drift run (drift_schedule's files)
  gpufleet.sglang.sglang_drift_report:
    src: /var/lib/sglang-drift/runner/artifacts/last/stdout
    json: /var/lib/sglang-drift/latest.json
    prom: /var/lib/prometheus/node-exporter/sglang_drift.prom
    report_dir: /var/lib/sglang-drift/reports
  delegate_to: localhost
  register: drift
"""

RETURN = r"""
status:
  description: The worst host status (clean, drift, error, unreachable).
  returned: always
  type: str
exit_code:
  description: 0 clean, 1 drift, 2 error or unreachable (what scripts/drift_report.py exits with).
  returned: always
  type: int
hosts:
  description: Per host its status and the counted items per category.
  returned: always
  type: dict
  sample: {"gpu1": {"status": "drift", "counts": {"unit": 1}}}
summary:
  description: The text summary (its last line is I(verdict)).
  returned: always
  type: str
verdict:
  description: The run in one line, the worst status, how many hosts had each status and what the exit code means.
  returned: always
  type: str
  sample: "drift: 2 hosts, 1 clean, 1 drift; exit code 1 (a host drifted, none failed or was unreachable)"
written:
  description: The files written (reports pruned from I(report_dir) are in I(pruned)).
  returned: always
  type: list
  elements: str
pruned:
  description: Old reports removed from I(report_dir).
  returned: always
  type: list
  elements: str
would_write:
  description: In check mode, the outputs a real run would write (I(report_dir) for the report saved there).
  returned: check mode
  type: list
  elements: str
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import drift_report
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            json=dict(type="path"),
            prom=dict(type="path"),
            report_dir=dict(type="path"),
            keep=dict(type="int", default=30),
            summary=dict(type="path"),
            diff_lines=dict(type="int", default=20),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_drift_report", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    if params["keep"] < 1:
        module.fail_json(msg="keep must be 1 or more, got %d" % params["keep"])
    if params["diff_lines"] < 0:
        module.fail_json(msg="diff_lines must be 0 or more, got %d" % params["diff_lines"])
    try:
        with open(params["src"], encoding="utf-8") as handle:
            run = drift_report.load_run(handle.read())
    except (OSError, ValueError) as exc:
        module.fail_json(msg="sglang_drift_report: cannot read %s: %s" % (params["src"], exc))
    now = datetime.datetime.now(datetime.timezone.utc)
    report = drift_report.build_report(run, now, params["diff_lines"], params["src"])
    text = drift_report.render_text(report)
    written, pruned = [], []
    if not module.check_mode:
        try:
            for key, render in (("json", drift_report.render_json), ("prom", drift_report.render_prom)):
                if params[key]:
                    drift_report.write_atomic(params[key], render(report))
                    written.append(params[key])
            if params["summary"]:
                drift_report.write_atomic(params["summary"], text)
                written.append(params["summary"])
            if params["report_dir"]:
                path, pruned = drift_report.save_to_dir(report, params["report_dir"], params["keep"], now)
                written.append(path)
        except OSError as exc:
            module.fail_json(msg="sglang_drift_report: writing %s failed: %s"
                             % (getattr(exc, "filename", None) or "a report", exc.strerror or exc))
    hosts = {host: {"status": info["status"], "counts": info["counts"]} for host, info in report["hosts"].items()}
    # A dry run writes nothing and says what a real run would: every output set is written (a new report each time).
    wanted = [params[key] for key in ("json", "prom", "summary") if params[key]] + (
        [params["report_dir"]] if params["report_dir"] else [])
    module.exit_json(changed=bool(written or (module.check_mode and wanted)), status=report["status"],
                     exit_code=report["exit_code"], hosts=hosts, summary=text,
                     verdict=drift_report.verdict_line(report), written=written, pruned=pruned,
                     **({"would_write": wanted} if module.check_mode else {}))


if __name__ == "__main__":
    main()
