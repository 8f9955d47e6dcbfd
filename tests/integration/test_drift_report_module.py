"""The sglang_drift_report module through real Ansible: verdict, files, check mode, clean refusals."""
import json

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
