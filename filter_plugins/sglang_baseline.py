# -*- coding: utf-8 -*-
"""Whether a recorded benchmark baseline can be compared with this gate run, read on the controller:

    {{ lookup('ansible.builtin.file', baseline_file, rstrip=false) | sglang_baseline_differences(judged_by) }}
        -> [] when comparable, else one line per difference ("output_len: 128 recorded, 64 now")

The settings a baseline must share with a run are the ones it recorded (its "settings", written by the gate module
from module_utils/bench_gate.py's comparable_settings): this filter compares those keys and owns no list of its own.
A baseline that cannot be read, recorded no settings, or holds no usable throughput (its median_output_tok_s not a
finite number above 0: NaN, infinite, 0, negative, a boolean; the gate module refuses to judge with it), is not
comparable either, and says why. The gate then measures a new baseline (the A/B leg) instead of failing on the old
one.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math


def _same(recorded, now):
    # The gate's settings come through Jinja: 64 and "64" are the same setting.
    return recorded == now or (recorded is not None and now is not None and str(recorded) == str(now))


def _usable_rate(value):
    """module_utils/finite_numbers.py's rate: a finite number above 0, not a boolean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value)) and value > 0
    except OverflowError:
        return False


def sglang_baseline_differences(text, settings):
    """TEXT (a baseline file's contents) against SETTINGS (this run's gate settings): what differs."""
    try:
        baseline = json.loads(text)
        recorded = baseline.get("settings")
    except (TypeError, ValueError, AttributeError) as exc:
        return ["the baseline cannot be read (%s)" % exc]
    if not isinstance(recorded, dict) or not recorded:
        return ["the baseline recorded no settings"]
    rate = baseline.get("median_output_tok_s")
    if not _usable_rate(rate):
        text = repr(rate)
        return ["the baseline holds no usable throughput (median_output_tok_s %s is not a finite number above 0)"
                % (text if len(text) <= 40 else text[:37] + "...")]
    return ["%s: %s recorded, %s now" % (key, json.dumps(recorded[key]), json.dumps(settings.get(key)))
            for key in sorted(recorded) if not _same(recorded[key], settings.get(key))]


class FilterModule(object):
    """Is the recorded baseline comparable with this gate run."""

    def filters(self):
        return {"sglang_baseline_differences": sglang_baseline_differences}
