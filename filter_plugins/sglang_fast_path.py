# -*- coding: utf-8 -*-
"""The fast path across the play's hosts (roles/sglang_fast_path compares each host with its last converge).

A host that matches joins the group CONVERGED (one add_host run for all of them); the plays after the comparison
leave that group out of their hosts, so a converged host costs no task there at all:

    hosts: "{{ sglang_hosts | default('blackwell') | sglang_without_converged(groups) }}"
    loop: "{{ ansible_play_hosts | sglang_fast_path_converged(hostvars) }}"     (the hosts that join the group)
    msg: "{{ ansible_play_hosts | sglang_fast_path_summary(hostvars) }}"       (one line for the matching hosts,
                                                                                one per host that differs)
    capabilities: "{{ table | sglang_fast_path_without(['benchmark']) }}"     (a record written before the gate)
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The group of the hosts that match their last converge; roles/sglang_fast_path's add_host makes it
# (tests/unit/test_fast_path_filters.py holds the role's name for it equal to this one).
CONVERGED = "sglang_fast_path_converged"


def sglang_without_converged(pattern, groups):
    """PATTERN (a play's hosts) as a list of patterns, less the group CONVERGED when this run made it: no
    warning about an unknown group when it did not (no host matched, or no comparison ran, as in benchmark.yml
    by itself)."""
    patterns = list(pattern) if isinstance(pattern, (list, tuple)) else [pattern]
    return patterns + (["!" + CONVERGED] if CONVERGED in (groups or {}) else [])


def _result(hostvars, host):
    """(matched, differences) of HOST's comparison (sglang_fast_path_comparison: skipped where the fast path is off)."""
    comparison = hostvars[host].get("sglang_fast_path_comparison") or {}
    return bool(comparison.get("matched")), dict(comparison.get("differences") or {})


def sglang_fast_path_converged(hosts, hostvars):
    """The HOSTS whose comparison found every capability as their last converge left it."""
    return [host for host in hosts if _result(hostvars, host)[0]]


def sglang_fast_path_summary(hosts, hostvars):
    """Lines that say, for HOSTS, why the roles run or why they need not: names and paths, never values."""
    results = {host: _result(hostvars, host) for host in hosts}
    matched = [host for host in hosts if results[host][0]]
    lines = []
    if matched:
        capabilities = sorted(results[matched[0]][1])
        lines.append("fast path on %d of %d hosts: every capability (%s) matches the last converge (its inputs "
                     "and what it left on the host); nothing to do there (-e deploy_fast_path=false runs every "
                     "role): %s" % (len(matched), len(hosts), ", ".join(capabilities), ", ".join(matched)))
    # No comparison ran where the fast path is off: no differences to name.
    off = [host for host in hosts if not results[host][0] and not any(results[host][1].values())]
    if off:
        lines.append("fast path off (deploy_fast_path false): every role runs on %s" % ", ".join(off))
    for host in hosts:
        if host in matched or host in off:
            continue
        differing = ["%s: %s" % (name, "; ".join(found)) for name, found in sorted(results[host][1].items()) if found]
        lines.append("full path on %s: %s" % (host, " | ".join(differing)))
    return lines


def sglang_fast_path_without(table, names, strict=True):
    """TABLE ({capability: ...}: the capabilities or their covers) less NAMES: what a record written before the
    benchmark gate holds (a capability it leaves out is "not in the converge record" to the next comparison, which
    sends the host down the full path and through the gate again). STRICT: every name must be one of TABLE's, so a
    renamed capability is never recorded as converged by a record meant to leave it out."""
    if not isinstance(table, dict):
        raise AnsibleFilterError("sglang_fast_path_without: expects a mapping of capabilities, got %r"
                                 % type(table).__name__)
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise AnsibleFilterError("sglang_fast_path_without: names must be a list of capabilities, got %r" % (names,))
    unknown = sorted(str(name) for name in names if name not in table)
    if strict and unknown:
        raise AnsibleFilterError("sglang_fast_path_without: %s %s none of the capabilities (%s)" % (
            ", ".join(unknown), "is" if len(unknown) == 1 else "are", ", ".join(sorted(table))))
    return {name: value for name, value in table.items() if name not in names}


class FilterModule(object):
    """The fast path's hosts: which matched, the patterns of the plays after it, what to say."""

    def filters(self):
        return {"sglang_without_converged": sglang_without_converged,
                "sglang_fast_path_converged": sglang_fast_path_converged,
                "sglang_fast_path_summary": sglang_fast_path_summary,
                "sglang_fast_path_without": sglang_fast_path_without}
