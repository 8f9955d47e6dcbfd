# -*- coding: utf-8 -*-
"""Which host seeds which when a model revision fans out between hosts (the sglang_model role's peer source).

    {{ wanting | sglang_model_fanout(holders, fanout, unusable) }}
      -> [{receiver: seed, ...}, {receiver: seed, ...}, ...]   one mapping per round

A round: every host that holds a verified copy at its start (a holder) seeds at most FANOUT hosts that want one; the
hosts served in a round hold a copy in the next, so with FANOUT 1 the number of holders doubles each round (k + 1
times with FANOUT k): 1 holder and 999 hosts wanting the model take 10 rounds, not 999 copies from one host.

* Hosts that want the model and already hold it are not served again; a host listed twice counts once.
* Seeds are used in the order HOLDERS gives, then the receivers of each round in their order: the same inputs give
  the same plan (inventory order in, a stable plan out).
* UNUSABLE hosts never seed (a seed whose copy was refused as corrupt, or that could not be reached): the role plans
  only the next round at a time from what actually happened, passing the seeds that failed here, so a failed seed's
  receivers are served by another holder in the next round. A host in UNUSABLE that wants the model is still served.
* No usable holder while a host still wants the model is an error naming the hosts left waiting.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - the unit tests import this file with ansible-core installed anyway
    AnsibleFilterError = ValueError


def _hosts(value, what):
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise AnsibleFilterError("sglang_model_fanout: %s must be a list of inventory host names, got %r"
                                 % (what, value))
    seen, result = set(), []
    for host in value:
        if not isinstance(host, str) or not host:
            raise AnsibleFilterError("sglang_model_fanout: %s holds %r, not an inventory host name" % (what, host))
        if host not in seen:
            seen.add(host)
            result.append(host)
    return result


def sglang_model_fanout(wanting, holders, fanout=1, unusable=None):
    """The rounds of a fan-out: a list of {receiver: seed}, each seed at most FANOUT receivers a round."""
    if isinstance(fanout, bool) or not isinstance(fanout, int):
        try:
            fanout = int(str(fanout).strip())
        except ValueError:
            raise AnsibleFilterError("sglang_model_fanout: fanout must be a whole number of 1 or more, got %r"
                                     % (fanout,))
    if fanout < 1:
        raise AnsibleFilterError("sglang_model_fanout: fanout must be 1 or more, got %d" % fanout)
    wanting, holders = _hosts(wanting, "wanting"), _hosts(holders, "holders")
    unusable = set(_hosts(unusable, "unusable"))
    holding = set(holders)
    todo = [host for host in wanting if host not in holding]
    seeds = [host for host in holders if host not in unusable]
    rounds = []
    while todo:
        if not seeds:
            raise AnsibleFilterError(
                "sglang_model_fanout: no host holds a usable verified copy (holders: %s; unusable: %s), so %s "
                "cannot be served: fetch the revision on one host from another source first"
                % (", ".join(holders) or "none", ", ".join(sorted(unusable)) or "none", ", ".join(todo)))
        # Each seed once, then each a second time, ... up to FANOUT: the load spreads over every seed first.
        slots = [seed for _turn in range(fanout) for seed in seeds]
        served = dict(zip(todo, slots))
        rounds.append(served)
        todo = todo[len(served):]
        seeds = seeds + list(served)
    return rounds


MAX_FAILURES = 2


def sglang_model_fanout_round(states, fanout=1):
    """The next round of every model's fan-out, from what each host of the play reports now.

    STATES: {host: {"wants": {key: origin}, "has": [key], "failures": {key: count}, "bad_seeds": {key: [seed]}}},
    the play's hosts in inventory order; a key is "<name>@<revision>", origin the source's host. A host that holds a
    key seeds it; an origin outside the play is taken to hold it (the copy refuses it otherwise). Seeds any host found
    bad for a key never seed it again; a host that failed MAX_FAILURES times for a key is no longer served.
    Returns {"assign": {host: [{"key", "seed"}]}, "stuck": {host: [why]}}: stuck hosts want a key no usable host
    holds."""
    if not isinstance(states, dict):
        raise AnsibleFilterError("sglang_model_fanout_round: states must be a mapping of host to state")
    keys = []
    for state in states.values():
        for key in (state.get("wants") or {}):
            if key not in keys:
                keys.append(key)
    assign, stuck = {}, {}
    for key in keys:
        wanting = [host for host, state in states.items() if key in (state.get("wants") or {})
                   and key not in (state.get("has") or [])
                   and int((state.get("failures") or {}).get(key, 0)) < MAX_FAILURES]
        holders = [host for host, state in states.items() if key in (state.get("has") or [])]
        for state in states.values():
            origin = (state.get("wants") or {}).get(key)
            if origin and origin not in states and origin not in holders:
                holders.append(origin)
        unusable = sorted({seed for state in states.values() for seed in (state.get("bad_seeds") or {}).get(key, [])})
        try:
            rounds = sglang_model_fanout(wanting, holders, fanout, unusable)
        except AnsibleFilterError as exc:
            for host in wanting:
                stuck.setdefault(host, []).append("%s: %s" % (key, exc))
            continue
        for receiver, seed in (rounds[0] if rounds else {}).items():
            assign.setdefault(receiver, []).append({"key": key, "seed": seed})
    return {"assign": assign, "stuck": stuck}


class FilterModule(object):
    """The order of a model's fan-out between hosts."""

    def filters(self):
        return {"sglang_model_fanout": sglang_model_fanout, "sglang_model_fanout_round": sglang_model_fanout_round}
