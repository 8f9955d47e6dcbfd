"""filter_plugins/sglang_model_fanout.py: which host seeds which when a model fans out between hosts, round by
round, for fleets of 1 to 1000 hosts, hosts already holding a copy, and a seed that failed."""
import math

import pytest

from ansible.errors import AnsibleFilterError
from tests.helpers.script_module import load_file

fanout = load_file("filter_plugins/sglang_model_fanout.py", "sglang_model_fanout").sglang_model_fanout


def hosts(count, prefix="g"):
    return ["%s%04d" % (prefix, index) for index in range(count)]


def check_plan(rounds, wanting, holders, k, unusable=()):
    """Every round obeys the rules: each seed held a copy at the round's start, was usable, served at most k; every
    wanting host is served exactly once, none that held a copy already."""
    have = set(holders)
    served = []
    for assign in rounds:
        assert assign, "an empty round"
        for receiver, seed in assign.items():
            assert seed in have and seed not in unusable, (receiver, seed)
            assert receiver not in have
        for seed in set(assign.values()):
            assert list(assign.values()).count(seed) <= k
        have |= set(assign)
        served += list(assign)
    assert sorted(served) == sorted(set(wanting) - set(holders))
    return have


@pytest.mark.parametrize("count", [1, 2, 3, 16, 1000])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_one_holder_serves_a_fleet_in_log_rounds(count, k):
    fleet = hosts(count)
    rounds = fanout(fleet, fleet[:1], k)
    check_plan(rounds, fleet, fleet[:1], k)
    # holders grow k+1 times a round: the fewest rounds any plan obeying the rules can take
    assert len(rounds) == (math.ceil(math.log(count, k + 1) - 1e-9) if count > 1 else 0)


def test_small_fleets_exactly():
    assert fanout(["g1"], ["g1"]) == []
    assert fanout(["g1", "g2"], ["g1"]) == [{"g2": "g1"}]
    assert fanout(["g1", "g2", "g3"], ["g1"]) == [{"g2": "g1"}, {"g3": "g1"}]
    assert fanout(["g2", "g3", "g4", "g5"], ["g1"]) == [{"g2": "g1"}, {"g3": "g1", "g4": "g2"}, {"g5": "g1"}]
    assert fanout(["g2", "g3", "g4"], ["g1"], 3) == [{"g2": "g1", "g3": "g1", "g4": "g1"}]


def test_1000_hosts_from_one_take_10_rounds_and_the_last_round_is_the_widest_use():
    fleet = hosts(1000)
    rounds = fanout(fleet[1:], fleet[:1])
    assert [len(assign) for assign in rounds] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 488]
    check_plan(rounds, fleet[1:], fleet[:1], 1)


def test_hosts_already_holding_are_not_served_and_all_seed_from_the_first_round():
    fleet = hosts(16)
    holders = [fleet[3], fleet[7], fleet[11], fleet[15]]
    rounds = fanout(fleet, holders)
    check_plan(rounds, fleet, holders, 1)
    assert len(rounds) == 2 and sorted(rounds[0].values()) == sorted(holders)
    assert fanout(fleet, fleet) == []


def test_the_same_inputs_give_the_same_plan_and_duplicates_count_once():
    fleet = hosts(37)
    assert fanout(fleet, fleet[:2], 2) == fanout(list(fleet), fleet[:2], 2)
    assert fanout(fleet + fleet, fleet[:2] + fleet[:1], 2) == fanout(fleet, fleet[:2], 2)


def test_a_failed_seed_is_replaced_by_another_holder_next_round():
    """The role plans one round at a time from what happened: g1 seeded g2 (ok) and g3 (its copy was refused);
    replanning with g1 unusable serves g3 and the rest from the others, never from g1."""
    fleet = ["g1", "g2", "g3", "g4", "g5", "g6"]
    first = fanout(fleet, ["g1"], 2)[0]
    assert first == {"g2": "g1", "g3": "g1"}
    rounds = fanout(fleet, ["g1", "g2"], 2, ["g1"])
    check_plan(rounds, fleet, ["g1", "g2"], 2, unusable={"g1"})
    assert rounds[0] == {"g3": "g2", "g4": "g2"} and all("g1" != seed for r in rounds for seed in r.values())


def test_a_whole_fan_out_with_failures_replanned_each_round_serves_everyone():
    """Simulate the role's loop: each round, receivers of a bad seed fail and are served again next round."""
    fleet, bad = hosts(100), {"g0005", "g0020"}
    have, unusable, rounds = ["g0000"], set(), 0
    while True:
        plan = fanout(fleet, have, 1, sorted(unusable))
        if not plan:
            break
        rounds += 1
        for receiver, seed in plan[0].items():
            assert seed not in unusable
            if seed in bad:
                unusable.add(seed)   # its copy was refused: the receiver waits for the next round
            else:
                have.append(receiver)
    assert set(have) == set(fleet) and unusable <= bad and rounds <= 10


def test_no_usable_seed_names_the_hosts_left_waiting():
    with pytest.raises(AnsibleFilterError) as error:
        fanout(["g1", "g2"], ["g1"], 1, ["g1"])
    assert "g2 cannot be served" in str(error.value) and "unusable: g1" in str(error.value)
    with pytest.raises(AnsibleFilterError) as error:
        fanout(["g1"], [])
    assert "holders: none" in str(error.value)


@pytest.mark.parametrize("args,needle", [
    (("g1", ["g0"]), "wanting must be a list"),
    ((["g1"], ["g0"], 0), "fanout must be 1 or more"),
    ((["g1"], ["g0"], "two"), "fanout must be a whole number"),
    ((["g1"], [None]), "holders holds None"),
])
def test_bad_input_is_named(args, needle):
    with pytest.raises(AnsibleFilterError) as error:
        fanout(*args)
    assert needle in str(error.value)


fanout_round = load_file("filter_plugins/sglang_model_fanout.py", "sglang_model_fanout").sglang_model_fanout_round


def test_the_roles_rounds_from_host_states_serve_everyone_and_avoid_a_bad_seed():
    fleet = hosts(9)
    states = {host: {"wants": {"m@r1": fleet[0], "d@v1": "outside"}, "has": [], "failures": {}, "bad_seeds": {}}
              for host in fleet}
    states[fleet[0]]["has"] = ["m@r1"]
    first = fanout_round(states, 1)
    assert first["stuck"] == {}
    assert first["assign"] == {fleet[1]: [{"key": "m@r1", "seed": fleet[0]}],
                               fleet[0]: [{"key": "d@v1", "seed": "outside"}]}
    rounds = 0
    while True:
        plan = fanout_round(states, 1)["assign"]
        if not plan:
            break
        rounds += 1
        for receiver, jobs in plan.items():
            for job in jobs:
                if job["seed"] == fleet[0] and job["key"] == "m@r1" and rounds == 2:
                    states[receiver]["failures"][job["key"]] = 1   # fleet[0]'s copy turned out corrupt
                    states[receiver]["bad_seeds"].setdefault(job["key"], []).append(fleet[0])
                else:
                    states[receiver]["has"].append(job["key"])
    assert all(set(state["has"]) == {"m@r1", "d@v1"} for state in states.values()) and rounds <= 6


def test_a_host_failing_twice_is_no_longer_served_and_no_holder_is_stuck():
    states = {"g1": {"has": ["m@r1"]}, "g2": {"wants": {"m@r1": "g1"}, "failures": {"m@r1": 2}},
              "g3": {"wants": {"x@1": "g4"}}, "g4": {"wants": {"x@1": "g4"}}}
    result = fanout_round(states, 1)
    assert "g2" not in result["assign"] and "no host holds a usable verified copy" in result["stuck"]["g3"][0]
