"""The sglang_drift_report module through real Ansible: verdict, files, check mode, clean refusals."""
import json

import pytest

from tests.helpers.ansible_run import run_module


def run_file(tmp_path):
    run = {"plays": [{"play": {"name": "p"}, "tasks": [
        {"task": {"name": "sglang_server : Write the unit", "path": "/x/roles/sglang_server/tasks/unit.yml:3"},
         "hosts": {"gpu1": {"changed": True, "dest": "/etc/systemd/system/sglang.service",
                            "diff": {"before": "a\n", "after": "b\n"}}}},
        {"task": {"name": "sglang_drift : Compare the driver", "path": "/x/roles/sglang_drift/tasks/host_probes.yml:9"},
         "hosts": {"gpu2": {"changed": False, "ansible_facts": {"sglang_drift_finding": {
             "item": "NVIDIA driver", "expected": "580", "actual": "580", "category": "driver"}}}}}]}],
        "stats": {"gpu1": {"ok": 2, "changed": 1, "failures": 0, "unreachable": 0},
                  "gpu2": {"ok": 2, "changed": 0, "failures": 0, "unreachable": 0}}}
    path = tmp_path / "out.json"
    path.write_text("a stray warning\n" + json.dumps(run))
    return path


def test_judges_and_writes_the_reports(tmp_path):
    args = {"src": str(run_file(tmp_path)), "json": str(tmp_path / "latest.json"), "prom": str(tmp_path / "d.prom"),
            "report_dir": str(tmp_path / "reports"), "keep": 2, "summary": str(tmp_path / "summary.txt")}
    result = run_module("sglang_drift_report", args)
    assert result["status"] == "drift" and result["exit_code"] == 1, result
    assert result["hosts"] == {"gpu1": {"status": "drift", "counts": {"unit": 1}},
                               "gpu2": {"status": "clean", "counts": {}}}
    assert json.loads((tmp_path / "latest.json").read_text())["exit_code"] == 1
    assert 'sglang_drift_items{host="gpu1",category="unit"} 1' in (tmp_path / "d.prom").read_text()
    assert (tmp_path / "summary.txt").read_text().startswith("gpu1  drift")
    assert len(list((tmp_path / "reports").iterdir())) == 1 and result["changed"]


def test_check_mode_judges_and_writes_nothing(tmp_path):
    result = run_module("sglang_drift_report", {"src": str(run_file(tmp_path)), "json": str(tmp_path / "l.json")},
                        check=True)
    # Nothing written, and it says what a real run would write (changed, as the real run is).
    assert result["exit_code"] == 1 and result["changed"] and result["written"] == []
    assert result["would_write"] == [str(tmp_path / "l.json")]
    assert not (tmp_path / "l.json").exists()


def test_bad_input_is_a_message(tmp_path):
    missing = run_module("sglang_drift_report", {"src": str(tmp_path / "none.json")})
    assert missing["failed"] and missing["msg"].startswith("sglang_drift_report: cannot read"), missing
    (tmp_path / "bad.json").write_text("{}")
    bad = run_module("sglang_drift_report", {"src": str(tmp_path / "bad.json")})
    assert bad["failed"] and "no 'plays'" in bad["msg"], bad
    keep = run_module("sglang_drift_report", {"src": str(run_file(tmp_path)), "keep": 0})
    assert keep["failed"] and "keep must be 1 or more" in keep["msg"], keep


# Issue 35: valid JSON of another shape was a traceback (AttributeError, TypeError, OverflowError, RecursionError).
@pytest.mark.parametrize("text,words", [
    ('{"plays": {"a": 1}}', ["plays must be a list"]),
    ('{"plays": [{"tasks": [{"task": {"name": "x"}, "hosts": [1]}]}]}', ["plays[0].tasks[0].hosts must be a mapping"]),
    ('{"plays": [{"tasks": [{"hosts": {"gpu1": "ok"}}]}]}', ["plays[0].tasks[0].hosts.gpu1 must be a mapping"]),
    ('{"plays": [], "stats": {"gpu1": {"failures": NaN}}}', ["stats.gpu1.failures must be a whole number"]),
    ('{"plays": [], "stats": {"gpu1": {"failures": 1e400}}}', ["stats.gpu1.failures must be a whole number"]),
    ('{"plays": [], "stats": {"gpu1": [0]}}', ["stats.gpu1 must be a mapping"]),
    ('{"plays": [{"play": {"name": ["p"]}}]}', ["plays[0].play.name must be text"]),
    ('{"plays": ' + "[" * 5000 + "]" * 5000 + "}", ["nested"]),
])
def test_a_run_of_another_shape_is_the_modules_own_message(tmp_path, text, words):
    (tmp_path / "out.json").write_text(text)
    result = run_module("sglang_drift_report", {"src": str(tmp_path / "out.json"), "json": str(tmp_path / "r.json")})
    assert result.get("failed") and "module_stderr" not in result and "Traceback" not in result["msg"], result
    assert result["msg"].startswith("sglang_drift_report: cannot read %s: not the output of the ansible.posix.json "
                                    "callback" % (tmp_path / "out.json")), result["msg"]
    for word in words:
        assert word in result["msg"], result["msg"]
    assert not (tmp_path / "r.json").exists()


NAN = "NAN"  # written as the callback writes a NaN (json.dumps of float("nan"))


def test_a_results_odd_content_is_reported_not_a_traceback(tmp_path):
    run = {"plays": [{"play": {"name": "p"}, "tasks": [{"task": {"name": "t", "path": "/x/roles/r/tasks/m.yml:1"},
                                                       "hosts": {"gpu1": {"changed": True, "invocation": [1],
                                                                          "results": 3, "sites": "x",
                                                                          "ansible_facts": ["drift"],
                                                                          "diff": [7, {"before": NAN}]}}}]}],
           "stats": {"gpu1": {"ok": 1, "changed": 1, "failures": 0, "unreachable": 0}}}
    (tmp_path / "out.json").write_text(json.dumps(run).replace('"NAN"', "NaN"))
    result = run_module("sglang_drift_report", {"src": str(tmp_path / "out.json"), "json": str(tmp_path / "r.json")})
    assert not result.get("failed") and result["exit_code"] == 1, result
    json.loads((tmp_path / "r.json").read_text(), parse_constant=lambda name: pytest.fail(name + " in the report"))
