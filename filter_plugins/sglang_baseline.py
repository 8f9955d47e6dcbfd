# -*- coding: utf-8 -*-
"""Whether a recorded benchmark baseline can be compared with this gate run, read on the controller:

    {{ lookup('ansible.builtin.file', baseline_file, rstrip=false) | sglang_baseline_differences(judged_by) }}
        -> [] when comparable, else one line per difference ("output_len: 128 recorded, 64 now")

The settings a baseline must share with a run are the ones it recorded (its "settings", written by the gate module
from module_utils/bench_gate.py's comparable_settings): this filter compares those keys and owns no list of its own.
A baseline that cannot be read, or recorded no settings, is not comparable either, and says why. The gate then
measures a new baseline (the A/B leg) instead of failing on the old one.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def _same(recorded, now):
    # The gate's settings come through Jinja: 64 and "64" are the same setting.
    return recorded == now or (recorded is not None and now is not None and str(recorded) == str(now))


def sglang_baseline_differences(text, settings):
    """TEXT (a baseline file's contents) against SETTINGS (this run's gate settings): what differs."""
    try:
        recorded = json.loads(text).get("settings")
    except (TypeError, ValueError, AttributeError) as exc:
        return ["the baseline cannot be read (%s)" % exc]
    if not isinstance(recorded, dict) or not recorded:
        return ["the baseline recorded no settings"]
    return ["%s: %s recorded, %s now" % (key, json.dumps(recorded[key]), json.dumps(settings.get(key)))
            for key in sorted(recorded) if not _same(recorded[key], settings.get(key))]


class FilterModule(object):
    """Is the recorded baseline comparable with this gate run."""

    def filters(self):
        return {"sglang_baseline_differences": sglang_baseline_differences}
