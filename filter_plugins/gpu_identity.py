# -*- coding: utf-8 -*-
"""Which GPUs and driver a host's canaries ran on: the one place that identity is taken from nvidia_gpu_facts.

    {{ nvidia_gpu | default(none) | gpu_identity }}   -> {"gpus": ["NVIDIA RTX PRO 6000 ...", ...], "driver": "580.65.06"}

A canary verdict is kept for it (with what else the canary proved): another driver, or other GPUs, is a host the
verdict never saw. Unknown facts give no GPUs and no driver.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def gpu_identity(facts):
    """{'gpus': [model name per GPU, in index order], 'driver': driver version or None}."""
    if facts is None:
        facts = {}
    if not isinstance(facts, dict):
        raise AnsibleFilterError("gpu_identity: expects the nvidia_gpu fact (a dict), got %r" % (facts,))
    gpus = facts.get("gpus") or []
    if not isinstance(gpus, list) or not all(isinstance(gpu, dict) for gpu in gpus):
        raise AnsibleFilterError("gpu_identity: nvidia_gpu.gpus must be a list of GPUs, got %r" % (gpus,))
    driver = facts.get("driver_version")
    return {"gpus": [str(gpu.get("name", "?")) for gpu in sorted(gpus, key=lambda gpu: gpu.get("index", 0))],
            "driver": None if driver is None else str(driver)}


class FilterModule(object):
    """The GPU identity a canary verdict is kept for."""

    def filters(self):
        return {"gpu_identity": gpu_identity}
