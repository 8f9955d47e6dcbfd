# -*- coding: utf-8 -*-
"""The server's tensor-parallel size where none is set: the one place that default is decided.

    sglang_server_tp_size: "{{ nvidia_gpu | default(none) | sglang_default_tp_size }}"
    sglang_allreduce_tp_size: "{{ sglang_server_tp_size | default(nvidia_gpu | default(none) | sglang_default_tp_size) }}"

Every GPU of the host, as nvidia_gpu_facts counted them (0 too: the roles' preflight refuses it with their own
message); 1 where the facts are unknown. Roles that size something
after the server (the canaries' world size, the all-reduce path's TP) fall back to it when sglang_server is not in
their play, so they never size another server than the one sglang_server would start.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def sglang_default_tp_size(facts):
    """The host's GPU count from the nvidia_gpu fact, or 1 without it."""
    if facts is None:
        return 1
    if not isinstance(facts, dict):
        raise AnsibleFilterError("sglang_default_tp_size: expects the nvidia_gpu fact (a dict), got %r" % (facts,))
    count = facts.get("gpu_count")
    if count is None:
        return 1
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise AnsibleFilterError("sglang_default_tp_size: nvidia_gpu.gpu_count must be a whole number of GPUs, "
                                 "got %r" % (count,))
    return count


class FilterModule(object):
    """The server's default tensor-parallel size."""

    def filters(self):
        return {"sglang_default_tp_size": sglang_default_tp_size}
