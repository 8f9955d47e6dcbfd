# -*- coding: utf-8 -*-
"""The batch sizes the playbooks pass to `serial` (deploy_serial, sglang_benchmark_parallel), checked before any
play changes a host: Ansible itself fails on a bad one only when the play that uses it starts, with a traceback.

    {{ deploy_serial | sglang_batches_problem('deploy_serial') }}   -> '' when usable, else why not

Usable is what `serial` takes: a count of 1 or more, a percentage "N%" with 1 <= N <= 100, or a list of those
(growing batches, e.g. [1, "25%"]).

The hosts of a rolling play (and the nodes of a multi-node server, for their ranks), in inventory order:

    hosts: "{{ groups | sglang_rolling_hosts('sglang_server_restart', hostvars | default([])) }}"

The groups those plays roll over are made by group_by, which adds hosts as their results arrive (whichever host
finished first); batches then follow inventory order instead, the same on every run. That order is hostvars' (the
hosts as the inventory was read), not groups['all']: group_by's groups become children of `all`, and `all` lists
their hosts, in arrival order, before those of nested groups such as lab -> blackwell. hostvars is undefined only
before the first play has run (and under --syntax-check), when no group_by has made a group yet: no hosts.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_PERCENT = re.compile(r"^\s*([0-9]+)\s*%\s*$")


def _one_problem(value):
    if isinstance(value, bool):
        return "%r is not a count or a percentage" % (value,)
    if isinstance(value, int):
        return "" if value >= 1 else "a count must be 1 or more, got %d" % value
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return _one_problem(int(text))
        match = _PERCENT.match(text)
        if match:
            pct = int(match.group(1))
            return "" if 1 <= pct <= 100 else "a percentage must be 1%%..100%%, got %s" % text
    return "%r is not a count (1, 2, ...) or a percentage (\"25%%\")" % (value,)


def sglang_batches_problem(value, name="serial"):
    """'' when `serial` can take VALUE, else a sentence naming NAME and what is wrong."""
    values = value if isinstance(value, list) else [value]
    if not values:
        return "%s: an empty list" % name
    problems = [p for p in (_one_problem(v) for v in values) if p]
    return "%s: %s" % (name, "; ".join(problems)) if problems else ""


def sglang_rolling_hosts(groups, name, inventory_hosts, without=None):
    """The hosts of group NAME (none when it was not made) in the order of INVENTORY_HOSTS (hostvars), less those of
    group WITHOUT (the benchmark gate's hosts kept as not passed, left out of its later plays)."""
    members = set(groups.get(name) or []) - set(groups.get(without) or [] if without else [])
    return [host for host in inventory_hosts if host in members]


class FilterModule(object):
    """Batch sizes for `serial`, checked up front, and the hosts of the rolling plays in inventory order."""

    def filters(self):
        return {"sglang_batches_problem": sglang_batches_problem, "sglang_rolling_hosts": sglang_rolling_hosts}
