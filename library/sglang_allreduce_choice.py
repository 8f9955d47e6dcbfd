#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/allreduce_choice.py (runs on the GPU host)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_allreduce_choice
short_description: Choose the all-reduce path the benchmark gate measured fastest and correct, and record it
version_added: "0.1.0"
description:
  - Takes every candidate path's judgement (the benchmark gate's verdict against the host's baseline for a server
    run on that path) and keeps the fastest path that passed (a tie keeps the one listed first in O(candidates)).
  - With a winner, writes it atomically to O(choice_file) (root, 0644) with the candidates and every path's
    figures; sglang_allreduce_paths reads it for C(auto) while the candidates are the same. Without one, removes
    the file, so the next deploy falls back (fusion where it can run, else nccl) and the gate decides again.
  - Check and diff mode report what would be written.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  choice_file:
    description: The choice's file on the host.
    type: path
    required: true
  candidates:
    description: The paths measured, in sglang_allreduce_paths' order (most ambitious first).
    type: list
    elements: str
    required: true
  rows:
    description:
      - One judgement per candidate, C(path), C(passed), C(median_tok_s), C(bar_tok_s), C(baseline_tok_s),
        C(match_rate), C(failures) (as the sglang_benchmark_gate module returns them).
    type: list
    elements: dict
    required: true
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Record the fastest correct path
  sglang_allreduce_choice:
    choice_file: /var/lib/sglang-deploy/allreduce-choice.json
    candidates: [fusion, nccl]
    rows:
      - {path: fusion, passed: true, median_tok_s: 151.2, bar_tok_s: 105.0, match_rate: 1.0, failures: []}
      - {path: nccl, passed: true, median_tok_s: 130.4, bar_tok_s: 105.0, match_rate: 1.0, failures: []}
"""

RETURN = r"""
winner:
  description: The path kept, or null when none passed.
  returned: success
  type: str
  sample: fusion
why:
  description: One line naming the winner, its figures, the other paths' and why any was rejected.
  returned: always
  type: str
paths:
  description: Every candidate's judgement, in the candidates' order.
  returned: success
  type: list
  elements: dict
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import allreduce_choice as ac
from ansible.module_utils import atomic_files
from ansible.module_utils import param_checks


def main():
    module = AnsibleModule(
        argument_spec=dict(
            choice_file=dict(type="path", required=True),
            candidates=dict(type="list", elements="str", required=True),
            rows=dict(type="list", elements="dict", required=True),
        ),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_allreduce_choice", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    p = module.params
    try:
        choice = ac.choose(p["rows"], p["candidates"])
        old_text = atomic_files.read_record(p["choice_file"])
        text = None
        if choice["winner"]:
            at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            text = ac.record(choice, p["candidates"], at)
    except (ac.ChoiceError, atomic_files.RecordError) as exc:
        module.fail_json(msg="all-reduce choice on %s: %s; nothing written" % (p["choice_file"], exc))
    changed = text is not None or old_text is not None
    result = dict(changed=changed, winner=choice["winner"], why=choice["why"], paths=choice["paths"])
    if module._diff:
        result["diff"] = atomic_files.record_diff(p["choice_file"], old_text, text)
    if changed and not module.check_mode:
        try:
            atomic_files.put_record(p["choice_file"], text)
        except atomic_files.RecordError as exc:
            module.fail_json(msg="all-reduce choice: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
