"""The drift reporter on callback files that are valid JSON of the wrong shape (issue 35): every node of a real
run's shape replaced by every other JSON type. Each is either refused by load_run with a message (ValueError, which
the module and the script report as their own) or reported; nothing raises anything else."""
import datetime
import json
import math

import pytest

from ansible.module_utils import drift_report as dr

NOW = datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
TASK = "/work/project/roles/sglang_server/tasks/unit.yml:3"


def sample_run():
    """One of each result the reporter reads: a change with a diff and its arguments, a loop, a probe (mapping and
    list), a failure, an unreachable host, a lock smoke report, a patch's sites; stats for each host."""
    change = {"changed": True, "action": "ansible.builtin.template", "msg": "ok",
              "diff": [{"before": "a\n", "after": "b\n", "before_header": "/etc/systemd/system/sglang.service",
                        "after_header": "/tmp/x.j2"}, {"prepared": "--- a\n+++ b\n"}],
              "invocation": {"module_args": {"dest": "/etc/systemd/system/sglang.service", "name": "x"}},
              "stdout": '{"mismatched": ["torch"], "missing": ["x"]}', "stderr": "e",
              "sites": [{"status": "would_patch", "gate": "g", "file": "f.py", "line": 3}]}
    loop = {"changed": True, "results": [{"changed": True, "item": {"path": "/etc/sglang/runtime.env"},
                                          "_ansible_item_label": "runtime.env", "diff": {"before": {"path": "/x"},
                                                                                       "after": {"path": "/y"}}},
                                         {"changed": False, "item": "b"}], "msg": "All items completed"}
    probe = {"changed": False, "ansible_facts": {"sglang_drift_finding": [
        {"item": "/var/lib/sglang/deployed-driver", "expected": {"a": 1}, "actual": {"a": 2}, "category": "driver",
         "detail": "d", "note": "n", "secondary": "true"},
        {"expected": "x", "actual": "x", "category": "unit", "drifted": "no"}]}}
    probe_loop = {"changed": False, "results": [{"ansible_facts": {"drift": {"expected": 1, "actual": 2}}}]}
    failed = {"failed": True, "msg": ["a", "b"], "results": [{"failed": True, "msg": "m"}]}
    unreachable = {"unreachable": True, "msg": "ssh"}
    task = lambda name, hosts, index: {"task": {"name": name, "id": "t%d" % index, "path": TASK,
                                                "duration": {"start": "s", "end": "e"}}, "hosts": hosts}
    return {
        "plays": [{"play": {"name": "drift", "id": "p", "duration": {"start": "2026-12-01T11:00:00Z",
                                                                    "end": "2026-12-01T11:01:00Z"}},
                   "tasks": [task("sglang_server : Write the unit", {"gpu1": change, "gpu2": failed}, 0),
                             task("sglang_install : Loop", {"gpu1": loop}, 1),
                             task("Drift probe: driver", {"gpu1": probe, "gpu2": probe_loop}, 2),
                             task("x : y", {"gpu3": unreachable}, 3)]}],
        "stats": {"gpu1": {"ok": 3, "changed": 2, "failures": 0, "unreachable": 0},
                  "gpu2": {"failures": 1, "unreachable": 0}, "gpu3": {"unreachable": 1}},
    }


WRONG = [None, True, 0, -1, 2.5, float("nan"), float("inf"), 10 ** 30, "", "x", [], [1, "a"], {}, {"k": [None]},
         [[[]]], {"ok": 1}]


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key in node:
            yield from paths(node[key], prefix + (key,))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from paths(item, prefix + (index,))


def replaced(run, where, value):
    if not where:
        return value
    copy = json.loads(json.dumps(run))
    node = copy
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    return copy


def _no_constant(name):
    raise AssertionError("%s in the JSON report: not JSON" % name)


def outcome(run):
    """'refused' (load_run's ValueError, the module's own message) or 'reported'; anything else raises."""
    try:
        loaded = dr.load_run(json.dumps(run))
    except ValueError as exc:
        assert str(exc), "a refusal says why"
        return "refused"
    report = dr.build_report(loaded, NOW, 5, "/tmp/out.json")
    dr.render_text(report)
    json.loads(dr.render_json(report), parse_constant=_no_constant)
    dr.render_prom(report)
    return "reported"


def test_the_sample_is_reported():
    assert outcome(sample_run()) == "reported"


def test_every_node_of_the_wrong_type_is_refused_or_reported():
    run = sample_run()
    crashes = []
    for where in paths(run):
        for value in WRONG:
            try:
                outcome(replaced(run, where, value))
            except Exception as exc:  # pylint: disable=broad-except  # the test collects every crash
                crashes.append("%s = %r: %s: %s" % ("/".join(map(str, where)), value, type(exc).__name__, exc))
    assert not crashes, "%d crash(es):\n%s" % (len(crashes), "\n".join(crashes[:40]))


@pytest.mark.parametrize("text", ["[" * 100000 + "]" * 100000, '{"plays": ' + "[" * 100000 + "]" * 100000 + "}"])
def test_json_nested_past_the_parsers_depth_is_refused(text):
    with pytest.raises(ValueError):
        dr.load_run(text)


def test_nan_stats_are_refused_with_a_message():
    run = sample_run()
    run["stats"]["gpu2"]["failures"] = math.nan
    with pytest.raises(ValueError, match="stats.gpu2.failures"):
        dr.load_run(json.dumps(run))
