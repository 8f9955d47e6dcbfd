"""sglang_server_fingerprint gives, in one call, the value the loop of ansible.builtin.stat gave (so a host keeps its
recorded fingerprint, and its server is not restarted, when the collection moves to the module), and it changes
with every input."""
import hashlib
import os

from tests.helpers.ansible_run import run_module


def layout(tmp_path):
    venv = tmp_path / "venvs" / "lock-a"
    (venv / ".sglang-fusion-patch").mkdir(parents=True)
    (venv / ".sglang-fusion-patch" / "state.json").write_text('{"sites": 2}\n')
    os.symlink(str(venv), str(tmp_path / "current"))
    (tmp_path / "sglang.service").write_text("[Service]\nExecStart=/bin/true\n")
    (tmp_path / "runtime.env").write_text("HOME=/var/lib/sglang\n")
    return [str(tmp_path / "sglang.service"), str(tmp_path / "current"),
            str(tmp_path / "current" / ".sglang-fusion-patch" / "state.json"), str(tmp_path / "runtime.env"),
            str(tmp_path / "nccl.env")]  # absent, as an optional EnvironmentFile may be


def stat_loop_value(paths, driver):
    """What fingerprint.yml computed before: stat (get_checksum) per path, checksums, then link targets, then driver."""
    stats = [run_module("ansible.builtin.stat", {"path": path, "get_checksum": True})["stat"] for path in paths]
    parts = ([s.get("checksum", "-") for s in stats] + [s.get("lnk_target", "-") for s in stats] + [driver])
    return hashlib.sha256(",".join(parts).encode()).hexdigest()


def fingerprint(paths, driver="580.65.06"):
    return run_module("sglang_server_fingerprint", {"paths": paths, "extra": [driver]})["fingerprint"]


def test_the_module_gives_the_stat_loop_value(tmp_path):
    paths = layout(tmp_path)
    assert fingerprint(paths) == stat_loop_value(paths, "580.65.06")


def test_every_input_changes_it(tmp_path):
    paths = layout(tmp_path)
    before = fingerprint(paths)
    assert fingerprint(paths, driver="590.44.01") != before
    (tmp_path / "nccl.env").write_text("NCCL_ALGO=Tree\n")
    with_nccl = fingerprint(paths)
    assert with_nccl != before
    other = tmp_path / "venvs" / "lock-b"
    other.mkdir()
    os.remove(paths[1])
    os.symlink(str(other), paths[1])
    assert fingerprint(paths) not in (before, with_nccl)


def test_relative_paths_are_refused(tmp_path):
    result = run_module("sglang_server_fingerprint", {"paths": ["etc/sglang.service"]})
    assert result.get("failed") and "must be absolute" in result["msg"] and "Traceback" not in result["msg"]


def test_the_recorded_fingerprint_comes_in_the_same_call(tmp_path):
    paths = layout(tmp_path)
    recorded = tmp_path / "deployed-config"
    first = run_module("sglang_server_fingerprint", {"paths": paths, "recorded": str(recorded)})
    assert first["recorded"] is None  # never started: no record, so the role restarts
    recorded.write_text(first["fingerprint"] + "\n")  # as restart.yml records it
    again = run_module("sglang_server_fingerprint", {"paths": paths, "recorded": str(recorded)})
    assert again["recorded"] == again["fingerprint"] == first["fingerprint"]
    unreadable = run_module("sglang_server_fingerprint", {"paths": paths, "recorded": str(tmp_path)})
    assert unreadable.get("failed") and str(tmp_path) in unreadable["msg"] and "Traceback" not in unreadable["msg"]
    assert "recorded" not in run_module("sglang_server_fingerprint", {"paths": paths})


def test_the_units_state_comes_in_the_same_call(tmp_path):
    # A stand-in systemctl (this test machine has no systemd as PID 1): it records its arguments and answers.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text('#!/bin/sh\necho "$@" > "%s"\necho %s\nexit %s\n'
                                    % (tmp_path / "args", "${FAKE_STATE:-active}", "${FAKE_RC:-0}"))
    os.chmod(str(fake / "systemctl"), 0o755)
    env = {"PATH": "%s:%s" % (fake, os.environ["PATH"])}
    args = {"paths": layout(tmp_path), "service": "sglang.service"}
    assert run_module("sglang_server_fingerprint", args, env=env)["active_state"] == "active"
    assert (tmp_path / "args").read_text().split() == ["show", "--property=ActiveState", "--value", "--",
                                                       "sglang.service"]
    env["FAKE_STATE"] = "failed"
    assert run_module("sglang_server_fingerprint", args, env=env)["active_state"] == "failed"
    env["FAKE_RC"] = "1"
    broken = run_module("sglang_server_fingerprint", args, env=env)
    assert broken.get("failed") and "systemctl show sglang.service failed (rc 1)" in broken["msg"]
