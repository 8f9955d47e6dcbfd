"""sglang_server's restore_key, which the benchmark gate's rollback runs after putting a saved state back: a saved
state holds no API key, so a rollback never brings back a key rotated out, and a restored unit whose use of the
key differs from the settings is refused before it starts."""
import json
import os

from tests.helpers.ansible_run import failure, run_playbook

PLAYBOOK = "tests/playbooks/sglang_restore_key.yml"
NEW_KEY, OLD_KEY = "sk-new-Zq81xKdfe0", "sk-old-Pw02yLmno9"


def setup(tmp_path, unit_passes_key, key_set=True):
    etc, units = tmp_path / "etc", tmp_path / "units"
    etc.mkdir()
    units.mkdir()
    options = etc / "api-key.yaml"
    options.write_text("api-key: %s\n" % json.dumps(OLD_KEY))  # what the saved state held
    os.chmod(str(options), 0o600)
    (units / "sglang-restore-test.service").write_text(
        "[Service]\nExecStart=/opt/sglang/current/bin/python -m sglang.launch_server --model-path /srv/m%s\n"
        % (" --config %s" % options if unit_passes_key else ""))
    key = tmp_path / "key"
    key.write_text(NEW_KEY + "\n")
    os.chmod(str(key), 0o600)
    return {"sglang_layout_env_dir": str(etc), "sglang_layout_unit_dir": str(units),
            "sglang_server_service": "sglang-restore-test",
            "sglang_server_api_key_file": str(key) if key_set else ""}, options


def test_the_key_as_set_now_replaces_the_one_the_saved_state_held(tmp_path):
    variables, options = setup(tmp_path, unit_passes_key=True)
    rc, report = run_playbook(PLAYBOOK, variables)
    assert rc == 0, failure(report)
    text = options.read_text()
    assert NEW_KEY in text and OLD_KEY not in text
    assert oct(os.stat(str(options)).st_mode & 0o777) == "0o640"  # root's, the service group reads it
    assert os.stat(str(options)).st_uid == 0  # the server cannot rewrite what root fingerprints
    printed = json.dumps(report)
    assert "rewritten=True" in printed and NEW_KEY not in printed and OLD_KEY not in printed


def test_a_restored_unit_without_the_key_is_refused_where_one_is_set(tmp_path):
    variables, _options = setup(tmp_path, unit_passes_key=False)
    rc, report = run_playbook(PLAYBOOK, variables)
    task, msg = failure(report)
    assert rc != 0 and task == "Refuse a restored unit that uses the API key otherwise than the settings say"
    assert "passes no API key, and sglang_server_api_key_file is set" in msg, msg
    assert NEW_KEY not in json.dumps(report)


def test_a_restored_unit_with_a_key_is_refused_where_none_is_set(tmp_path):
    variables, options = setup(tmp_path, unit_passes_key=True, key_set=False)
    rc, report = run_playbook(PLAYBOOK, variables)
    task, msg = failure(report)
    assert rc != 0 and "passes an API key, and sglang_server_api_key_file is not set" in msg, msg
    assert not options.exists()  # the key turned off: its options file is gone, the old key with it
