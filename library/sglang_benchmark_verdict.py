#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/gate_verdict.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_benchmark_verdict
short_description: Read or record the benchmark gate's verdict for the server a host runs
version_added: "0.1.0"
description:
  - The benchmark gate keeps one verdict per host, attached to the fingerprint sglang_server records at every proven
    start (unit, environment files, venv, fusion patch, GPU driver) and to a digest of the gate's own settings.
  - C(state=query) says whether the host must be measured (O(force), no proven start, no verdict, a different
    fingerprint or settings digest, or a failed verdict) or why its recorded verdict still holds. Reads only.
  - C(state=recorded) writes the verdict atomically (root, 0644), for the fingerprint O(fingerprint) the query
    returned before the measurement.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  verdict_file:
    description: The verdict's file on the host.
    type: path
    required: true
  config_file:
    description: The server's record of its last proven start (its first line is the fingerprint).
    type: path
    required: true
  settings:
    description: The gate's settings the verdict depends on (measurement, baseline, margin, correctness).
    type: dict
    required: true
  force:
    description: Measure whatever is recorded (query).
    type: bool
    default: false
  state:
    description: C(query) reads; C(recorded) writes a verdict.
    type: str
    choices: [query, recorded]
    default: query
  fingerprint:
    description: The fingerprint the measured server ran with (C(state=recorded); the query's RV(fingerprint)).
    type: str
  passed:
    description: The gate's verdict (C(state=recorded)).
    type: bool
  summary:
    description: One line a later deploy reports while the verdict holds (C(state=recorded)).
    type: str
    default: ""
  details:
    description: Figures kept with the verdict (median, bar, baseline, results paths).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Decide whether this host must be measured
  sglang_benchmark_verdict:
    verdict_file: /var/lib/sglang-deploy/gate-verdict.json
    config_file: /var/lib/sglang-deploy/.deployed-config
    settings: {margin_pct: 5.0, num_prompts: 8}
  register: verdict

- name: Record the gate's verdict
  sglang_benchmark_verdict:
    verdict_file: /var/lib/sglang-deploy/gate-verdict.json
    config_file: /var/lib/sglang-deploy/.deployed-config
    settings: {margin_pct: 5.0, num_prompts: 8}
    state: recorded
    fingerprint: "{{ verdict.fingerprint }}"
    passed: true
    summary: "passed: median 140.2 tok/s >= 86.1 required"
"""

RETURN = r"""
measure:
  description: Whether the host must be measured (query).
  returned: state=query
  type: bool
reason:
  description: Why it must be measured, or why its verdict still holds.
  returned: always
  type: str
fingerprint:
  description: The server's recorded fingerprint now (null when it has no proven start).
  returned: always
  type: str
settings_digest:
  description: The digest of O(settings).
  returned: always
  type: str
recorded:
  description: The recorded verdict (query), or the one written (recorded); null when none is usable.
  returned: always
  type: dict
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import atomic_files
from ansible.module_utils import gate_verdict
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            verdict_file=dict(type="path", required=True),
            config_file=dict(type="path", required=True),
            settings=dict(type="dict", required=True),
            force=dict(type="bool", default=False),
            state=dict(type="str", default="query", choices=["query", "recorded"]),
            fingerprint=dict(type="str"),
            passed=dict(type="bool"),
            summary=dict(type="str", default=""),
            details=dict(type="dict", default={}),
        ),
        required_if=[("state", "recorded", ("fingerprint", "passed"))],
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_benchmark_verdict", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    try:
        digest = gate_verdict.settings_digest(p["settings"])
        fingerprint = gate_verdict.fingerprint_of(atomic_files.read_record(p["config_file"]))
        old_text = atomic_files.read_record(p["verdict_file"])
        recorded, problem = gate_verdict.parse(old_text)
        if p["state"] == "query":
            measure, reason = gate_verdict.decide(recorded, problem, fingerprint, digest, p["force"])
            module.exit_json(changed=False, measure=measure, reason=reason, fingerprint=fingerprint,
                             settings_digest=digest, recorded=recorded)
        at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        text = gate_verdict.record(p["fingerprint"], digest, p["passed"], at, p["summary"], p["details"])
    except (gate_verdict.VerdictError, atomic_files.RecordError) as exc:
        module.fail_json(msg="benchmark verdict on %s: %s; nothing written" % (p["verdict_file"], exc))
    outcome = p["summary"] or ("passed" if p["passed"] else "failed")
    result = dict(changed=True, reason="verdict recorded: %s" % outcome,
                  fingerprint=p["fingerprint"], settings_digest=digest, recorded=gate_verdict.parse(text)[0])
    if module._diff:
        result["diff"] = atomic_files.record_diff(p["verdict_file"], old_text, text)
    if not module.check_mode:
        try:
            atomic_files.put_record(p["verdict_file"], text)
        except atomic_files.RecordError as exc:
            module.fail_json(msg="benchmark verdict: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
