"""sglang_benchmark_verdict through real Ansible: query, record, check and diff mode, refusals without a traceback."""
import json
import os

from tests.helpers.ansible_run import refusal as refused, run_module

SETTINGS = {"margin_pct": 5.0, "num_prompts": 8}


def paths(tmp_path, fingerprint="abc123"):
    config = tmp_path / ".deployed-config"
    if fingerprint is not None:
        config.write_text(fingerprint + "\n")
    return {"verdict_file": str(tmp_path / "gate-verdict.json"), "config_file": str(config), "settings": SETTINGS}


def test_query_record_then_the_same_server_is_not_measured_again(tmp_path):
    base = paths(tmp_path)
    first = run_module("sglang_benchmark_verdict", base)
    assert first["measure"] and first["reason"] == "no verdict recorded yet" and not first["changed"]
    assert first["fingerprint"] == "abc123"

    wrote = run_module("sglang_benchmark_verdict", dict(base, state="recorded", fingerprint=first["fingerprint"],
                                                        passed=True, summary="passed: 140 tok/s"))
    assert wrote["changed"] and wrote["recorded"]["passed"]
    on_disk = json.loads((tmp_path / "gate-verdict.json").read_text())
    assert on_disk["fingerprint"] == "abc123" and on_disk["settings_digest"] == first["settings_digest"]
    assert oct(os.stat(base["verdict_file"]).st_mode & 0o777) == "0o644"

    again = run_module("sglang_benchmark_verdict", base)
    assert not again["measure"] and "still holds: passed: 140 tok/s" in again["reason"]

    (tmp_path / ".deployed-config").write_text("def456\n")
    changed = run_module("sglang_benchmark_verdict", base)
    assert changed["measure"] and "what the server runs changed" in changed["reason"]

    forced = run_module("sglang_benchmark_verdict", dict(base, force=True, config_file=base["config_file"]))
    assert forced["measure"] and "forced" in forced["reason"]


def test_check_mode_records_nothing_and_diff_shows_the_verdict(tmp_path):
    base = paths(tmp_path)
    result = run_module("sglang_benchmark_verdict", dict(base, state="recorded", fingerprint="abc123", passed=False),
                        check=True, diff=True)
    assert result["changed"] and '"passed": false' in result["diff"]["after"]
    assert not os.path.exists(base["verdict_file"])


def test_a_host_without_a_proven_start_is_measured(tmp_path):
    result = run_module("sglang_benchmark_verdict", paths(tmp_path, fingerprint=None))
    assert result["measure"] and "no proven server start" in result["reason"] and result["fingerprint"] is None


def test_bad_inputs_are_refused_with_a_message_and_nothing_written(tmp_path):
    base = paths(tmp_path)
    assert "missing" in refused(run_module("sglang_benchmark_verdict", dict(base, state="recorded")))
    assert "no fingerprint" in refused(run_module("sglang_benchmark_verdict",
                                                  dict(base, state="recorded", fingerprint="", passed=True)))
    assert "not a directory" in refused(run_module("sglang_benchmark_verdict", dict(
        base, verdict_file=str(tmp_path / "absent" / "v.json"), state="recorded", fingerprint="f", passed=True)))
    assert "unable to convert to dict" in refused(run_module("sglang_benchmark_verdict", dict(base, settings="x")))
    (tmp_path / "dir-as-config").mkdir()
    assert "cannot read" in refused(run_module("sglang_benchmark_verdict",
                                               dict(base, config_file=str(tmp_path / "dir-as-config"))))
    assert not os.path.exists(base["verdict_file"])


def test_a_corrupt_verdict_is_judged_again(tmp_path):
    base = paths(tmp_path)
    (tmp_path / "gate-verdict.json").write_text("{half")
    result = run_module("sglang_benchmark_verdict", base)
    assert result["measure"] and "not JSON" in result["reason"]


def test_nothing_non_finite_is_recorded_and_a_truthy_passed_is_no_pass(tmp_path):
    base = paths(tmp_path)
    details = {"verdict": {"median_tok_s": float("nan"), "bar_tok_s": 89.2}}
    msg = refused(run_module("sglang_benchmark_verdict", dict(base, state="recorded", fingerprint="abc123",
                                                              passed=True, details=details)))
    assert "NaN or infinite number is never recorded" in msg and "nothing written" in msg
    msg = refused(run_module("sglang_benchmark_verdict", dict(base, settings={"margin_pct": float("inf")})))
    assert "a NaN or infinite number is not a setting" in msg
    assert not os.path.exists(base["verdict_file"])
    digest = run_module("sglang_benchmark_verdict", base)["settings_digest"]
    (tmp_path / "gate-verdict.json").write_text(json.dumps({"version": 1, "fingerprint": "abc123", "passed": "false",
                                                            "settings_digest": digest, "at": "then"}))
    result = run_module("sglang_benchmark_verdict", base)
    assert result["measure"] and "passed is 'false', not true or false" in result["reason"], result
