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


def keyed(tmp_path, paths, key="hunter2", check=False, salt=None):
    """The fingerprint with the API key options as a secret path, as fingerprint.yml passes them."""
    options = tmp_path / "api-key.yaml"
    options.write_text('api-key: "%s"\n' % key)
    salt = salt or str(tmp_path / ".fingerprint-salt")
    return run_module("sglang_server_fingerprint", {"paths": paths + [str(options)], "keyed_paths": [str(options)],
                                                     "salt_file": salt, "extra": ["580.65.06"]}, check=check)


def test_a_secret_file_is_keyed_with_the_hosts_salt_not_hashed_plainly(tmp_path):
    paths = layout(tmp_path)
    first = keyed(tmp_path, paths)
    salt = tmp_path / ".fingerprint-salt"
    assert first["changed"] and first["salt_created"]
    assert oct(salt.stat().st_mode & 0o777) == "0o600" and len(salt.read_text().strip()) == 64
    # Whoever reads every input but the salt (the record is world-readable) cannot recompute it from a guessed key.
    guessable = stat_loop_value(paths + [str(tmp_path / "api-key.yaml")], "580.65.06")
    assert first["fingerprint"] != guessable
    again = keyed(tmp_path, paths)
    assert not again["changed"] and not again["salt_created"] and again["fingerprint"] == first["fingerprint"]
    assert keyed(tmp_path, paths, key="rotated")["fingerprint"] != first["fingerprint"]
    # Another host (another salt), the same key: another fingerprint.
    assert keyed(tmp_path, paths, salt=str(tmp_path / "other-salt"))["fingerprint"] != first["fingerprint"]


def test_a_dry_run_makes_no_salt_and_matches_no_record(tmp_path):
    paths = layout(tmp_path)
    dry = keyed(tmp_path, paths, check=True)
    assert dry["changed"] and dry["salt_created"] and not (tmp_path / ".fingerprint-salt").exists()
    assert keyed(tmp_path, paths)["fingerprint"] != dry["fingerprint"]


def test_a_salt_others_can_read_or_not_a_salt_is_refused(tmp_path):
    paths = layout(tmp_path)
    salt = tmp_path / ".fingerprint-salt"
    salt.write_text("ab" * 32 + "\n")
    salt.chmod(0o644)
    loose = keyed(tmp_path, paths)
    assert loose.get("failed") and str(salt) in loose["msg"] and "mode 0600" in loose["msg"]
    assert "remove it" in loose["msg"] and "Traceback" not in loose["msg"]
    salt.chmod(0o600)
    assert not keyed(tmp_path, paths).get("failed")
    salt.write_text("not a salt\n")
    garbage = keyed(tmp_path, paths)
    assert garbage.get("failed") and "64 hex digits" in garbage["msg"] and "Traceback" not in garbage["msg"]
    salt.unlink()
    salt.mkdir()
    assert "not a regular file" in keyed(tmp_path, paths)["msg"]


def test_keyed_paths_need_a_salt_and_must_be_fingerprinted(tmp_path):
    paths = layout(tmp_path)
    no_salt = run_module("sglang_server_fingerprint", {"paths": paths, "keyed_paths": [paths[0]]})
    assert no_salt.get("failed") and "keyed_paths need salt_file" in no_salt["msg"]
    stray = run_module("sglang_server_fingerprint", {"paths": paths, "keyed_paths": ["/etc/sglang/api-key.yaml"],
                                                      "salt_file": str(tmp_path / "salt")})
    assert stray.get("failed") and "not in paths: /etc/sglang/api-key.yaml" in stray["msg"]
    missing_dir = run_module("sglang_server_fingerprint", {"paths": paths, "keyed_paths": [paths[0]],
                                                            "salt_file": str(tmp_path / "no-such-dir" / "salt")})
    assert missing_dir.get("failed") and "cannot write" in missing_dir["msg"] and "Traceback" not in missing_dir["msg"]


def test_each_input_has_its_digest_and_the_restart_names_the_changed_ones(tmp_path):
    """Issue 39: a restart says which inputs changed, compared input by input with the record."""
    paths = layout(tmp_path)
    names = ["unit", "venv target", "patch record", "runtime env", "nccl env", "GPU driver"]
    recorded = tmp_path / "deployed-config"
    args = {"paths": paths, "names": names, "extra": ["580.65.06"], "recorded": str(recorded)}
    first = run_module("sglang_server_fingerprint", args)
    assert first["restart"] and first["reasons"] == ["no proven start recorded"] and first["changed_inputs"] is None
    assert first["inputs"]["nccl env"] == "-" and first["inputs"]["venv target"].startswith("link:")
    assert first["inputs"]["GPU driver"] == "580.65.06"
    assert first["record"].splitlines()[0] == first["fingerprint"] == fingerprint(paths)
    recorded.write_text(first["record"])  # as restart.yml records it
    again = run_module("sglang_server_fingerprint", args)
    assert (again["restart"], again["reasons"], again["changed_inputs"]) == (False, [], [])
    assert again["recorded"] == first["fingerprint"] and again["recorded_inputs"] == first["inputs"]
    (tmp_path / "nccl.env").write_text("NCCL_ALGO=Ring\n")
    changed = run_module("sglang_server_fingerprint", dict(args, extra=["590.1"]))
    assert changed["restart"] and changed["changed_inputs"] == ["nccl env", "GPU driver"]
    assert changed["reasons"] == ["changed: nccl env, GPU driver"]
    # A dry run passes what the deploy would write back: no restart, as the deploy will find.
    repaired = run_module("sglang_server_fingerprint", dict(args, pending={paths[4]: "absent"}), check=True)
    assert (repaired["restart"], repaired["fingerprint"]) == (False, first["fingerprint"])


def test_an_old_record_is_read_and_says_unknown_which_input(tmp_path):
    paths = layout(tmp_path)
    recorded = tmp_path / "deployed-config"
    recorded.write_text(fingerprint(paths) + "\n")  # the format before per-input digests
    args = {"paths": paths, "extra": ["580.65.06"], "recorded": str(recorded)}
    same = run_module("sglang_server_fingerprint", args)
    assert (same["restart"], same["recorded_inputs"]) == (False, None)
    other = run_module("sglang_server_fingerprint", dict(args, extra=["590.1"]))
    assert other["restart"] and other["changed_inputs"] is None and "unknown which input" in other["reasons"][0]


def test_names_pending_and_rewritten_are_checked(tmp_path):
    paths = layout(tmp_path)
    for args, words in [({"names": ["unit"]}, "names must name every path"),
                        ({"pending": {paths[0]: "sha1:zz"}}, "pending[%s]" % paths[0]),
                        ({"pending_content": {paths[0]: "x"}}, "pending_content is for keyed_paths only"),
                        ({"rewritten": ["unit"]}, "rewritten names no input: unit")]:
        result = run_module("sglang_server_fingerprint", dict({"paths": paths}, **args))
        assert result.get("failed") and words in result["msg"] and "Traceback" not in result["msg"], result


def test_pending_content_is_never_shown(tmp_path):
    paths = layout(tmp_path)
    options = tmp_path / "api-key.yaml"
    options.write_text('api-key: "tampered"\n')
    result = run_module("sglang_server_fingerprint", {
        "paths": paths + [str(options)], "keyed_paths": [str(options)], "salt_file": str(tmp_path / "salt"),
        "pending_content": {str(options): 'api-key: "hunter2-secret"\n'}})
    assert not result.get("failed") and "hunter2-secret" not in str(result)
