#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/bench_gate_run.py (runs on the controller)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_benchmark_gate
short_description: Judge one SGLang benchmark measurement against a baseline and write the artifacts
version_added: "0.1.0"
description:
  - Reads what C(roles/sglang_benchmark/files/bench_runner.py) measured on one host (SGLang's own benchmark client
    result lines and greedy completions of a fixed prompt set) and decides whether the deployment may stay.
  - A run counts only when every request completed (C(completed == num_prompts)); the gate uses the median output
    tok/s of the counted runs at O(gate_concurrency) and passes when it is at least baseline x (1 + O(margin_pct)/100),
    every run counted, and the completions match the recorded baseline's (token match rate >= O(min_match_rate)).
  - Writes, on the controller, one JSON per run, a history line, a Markdown summary and a PNG chart of the history
    under O(results_dir)/<host>/ (artifacts only, so reported as not changed). With O(record_baseline) it writes the
    baseline file (throughput and completions) from this measurement instead of judging.
  - Never fails on a failed gate (the playbook decides, after rollback); fails on unusable inputs.
  - Trusts no number unchecked. A run's C(output_throughput) counts only as a finite number above 0 and its
    C(completed) only as a whole number (JSON C(true) is neither); a run that fails either does not count. A recorded
    baseline whose C(median_output_tok_s) is not a finite number above 0 (NaN, infinite, 0, negative, a boolean, a
    string) judges nothing. The module then fails naming the file and the field (delete it or record a new one; the
    role's decide step measures a new one itself). Nothing it writes holds a NaN or infinite number (written as
    null).
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  host:
    description: The host measured (names its artifact folder, so letters, digits, ".", "_", "-" only).
    type: str
    required: true
  measurement:
    description: The JSON object bench_runner.py printed.
    type: dict
    required: true
  baseline_mode:
    description:
      - C(static) compares with O(baseline_tok_s); C(file) and C(ab) with the median recorded in O(baseline_file).
      - Correctness always compares with the completions in O(baseline_file).
    type: str
    choices: [static, file, ab]
    default: file
  baseline_tok_s:
    description: The static baseline (the seeds measured 82-90 tok/s without speculation); a finite number above 0.
    type: float
  baseline_file:
    description: Path on the controller of this host's recorded baseline (JSON).
    type: path
    required: true
  record_baseline:
    description:
      - Write O(baseline_file) from this measurement (all runs must count) and do not judge.
      - A baseline already there that is unreadable, holds no usable throughput or was measured with other settings
        is kept beside it, renamed C(<name>.replaced-<UTC time>.json), instead of overwritten.
    type: bool
    default: false
  margin_pct:
    description: Required gain over the baseline, in percent (a finite number, 0 or more; 0 passes a server as fast
      as the baseline).
    type: float
    default: 5.0
  gate_concurrency:
    description: The concurrency whose median is gated.
    type: int
    default: 1
  correctness:
    description: Compare greedy completions with the baseline's.
    type: bool
    default: true
  min_match_rate:
    description: Lowest token match rate (0..1) of the greedy completions that passes.
    type: float
    default: 0.75
  tie_max_gap:
    description:
      - A prompt whose completion parts from the baseline's where, in both servers' top-2 logprobs, the two tokens
        are the two best and at most this far apart (nats) parted at a tie and counts as matching.
      - The default is one bfloat16 step of logits from 16 to 32; 0 takes exact ties only. From 0 to 0.5.
      - Completions without logprobs (a server that refuses them, a baseline recorded before they were asked for)
        are compared token by token.
    type: float
    default: 0.125
  results_dir:
    description: Controller folder for the artifacts (relative paths resolve from the working directory).
    type: path
    required: true
  context:
    description: Facts recorded with the run (venv, lock, patch state, rollback outcome...).
    type: dict
    default: {}
  write_artifacts:
    description:
      - Write the run JSON, history, summary and chart. Off for the judgement of one all-reduce path trial (the
        gate's run that follows records every path side by side through O(allreduce)).
    type: bool
    default: true
  allreduce:
    description:
      - "For C(sglang_allreduce_path=auto) with several candidates: the trials' outcome, C(winner), C(why) and
        C(paths) (one judgement per path: C(path), C(passed), C(median_tok_s), C(bar_tok_s), C(baseline_tok_s),
        C(match_rate), C(failures)). Recorded in the run JSON, tabled in the summary, charted in
        C(allreduce-paths.png), and its C(why) closes the message."
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Judge the measurement
  sglang_benchmark_gate:
    host: "{{ inventory_hostname }}"
    measurement: "{{ __sglang_benchmark_measured.stdout | from_json }}"
    baseline_mode: static
    baseline_tok_s: 82
    baseline_file: reports/benchmark/baselines/{{ inventory_hostname }}.json
    results_dir: reports/benchmark
  delegate_to: localhost
  register: gate
"""

RETURN = r"""
passed:
  description: The verdict (also true after O(record_baseline)).
  returned: always
  type: bool
message:
  description: The verdict with every number it used.
  returned: always
  type: str
failures:
  description: One line per failed check (incomplete, throughput, correctness).
  returned: always
  type: list
  elements: str
verdict:
  description: median_tok_s, bar_tok_s, baseline_tok_s, margin_pct, gate_concurrency.
  returned: unless record_baseline
  type: dict
summary:
  description: Per concurrency, counted runs, median/min/max/spread of output tok/s, TTFT, TPOT, accept length.
  returned: always
  type: dict
correctness:
  description: match_rate, ties (prompts that parted at a tie) and per-prompt rows (match, tie_at), when checked.
  returned: when correctness is on and not record_baseline
  type: dict
artifacts:
  description:
    - Paths of the run JSON, history, summary and chart.
    - When recording, the baseline file, and C(replaced_baseline) where an earlier one was kept aside.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import bench_gate_run
from ansible.module_utils import param_checks

ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    measurement=dict(type="dict", required=True),
    baseline_mode=dict(type="str", default="file", choices=["static", "file", "ab"]),
    baseline_tok_s=dict(type="float"),
    baseline_file=dict(type="path", required=True),
    record_baseline=dict(type="bool", default=False),
    margin_pct=dict(type="float", default=5.0),
    gate_concurrency=dict(type="int", default=1),
    correctness=dict(type="bool", default=True),
    min_match_rate=dict(type="float", default=0.75),
    tie_max_gap=dict(type="float", default=0.125),
    results_dir=dict(type="path", required=True),
    context=dict(type="dict", default={}),
    write_artifacts=dict(type="bool", default=True),
    allreduce=dict(type="dict", default={}),
)


def _module():
    """The AnsibleModule, with the module's own message where Ansible's float conversion raises OverflowError (an
    int too large for a float given to a float option, say margin_pct written as 400 digits: a traceback there)."""
    try:
        return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False)
    except OverflowError:
        pass  # reported below, outside the handler (fail_json inside it would attach the exception)
    module = AnsibleModule(argument_spec=bench_gate_run.raw_floats(ARGUMENT_SPEC), supports_check_mode=False)
    module.fail_json(msg=bench_gate_run.too_large(ARGUMENT_SPEC, module.params))
    return None  # not reached: fail_json exits


def main():
    module = _module()
    refused = param_checks.refusal("sglang_benchmark_gate", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    result = failure = None
    try:
        result = bench_gate_run.run(module.params)
    except bench_gate_run.GateFailure as exc:
        failure = exc
    if failure:  # reported outside the except clause: a refusal is an answer, not a traceback
        module.fail_json(msg=failure.msg, **failure.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
