"""sglang_unit_values checks on the controller (action_plugins/) and says what the module would say."""
import json
import os
import subprocess
import sys

from tests.helpers.ansible_run import ANSIBLE, REPO

GOOD = {"context": "sglang_server", "values": {
    "sglang_server_venv": {"value": "/opt/sglang/current", "kind": "path"},
    "sglang_server_port": {"value": 30000, "kind": "integer", "low": 1, "high": 65535}}}
BAD = {"context": "sglang_server", "values": {
    "sglang_server_venv": {"value": "/opt/sglang/current\nExecStartPre=+/bin/sh", "kind": "path"},
    "sglang_server_port": {"value": 70000, "kind": "integer", "low": 1, "high": 65535}}}


def run(args, host, connection, env=None):
    """The task's result for one host, from the JSON callback."""
    env = dict(os.environ, **(env or {}))
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run([ANSIBLE, "all", "-i", host + ",", "-c", connection, "-m", "sglang_unit_values",
                           "-a", json.dumps(args),
                           "-e", "ansible_python_interpreter=" + sys.executable], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("no JSON (rc %s):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    return report["plays"][0]["tasks"][0]["hosts"][host]


def test_checks_without_contacting_the_host():
    # A host that cannot be resolved: any connection attempt would make it unreachable.
    result = run(GOOD, "no-such-host.invalid", "ssh")
    assert not result.get("unreachable") and not result.get("failed"), result
    assert result["checked"] == ["sglang_server_port", "sglang_server_venv"]
    assert result["changed"] is False


def test_refuses_every_bad_value_on_the_controller():
    result = run(BAD, "no-such-host.invalid", "ssh")
    assert result["failed"] and not result.get("unreachable"), result
    assert result["msg"].startswith("sglang_server refused, nothing written: ")
    assert len(result["errors"]) == 2
    assert any("sglang_server_venv holds a newline" in e for e in result["errors"])
    assert any("sglang_server_port" in e for e in result["errors"])


def test_refuses_malformed_arguments_with_a_message():
    result = run({"context": "x", "values": [1, 2]}, "no-such-host.invalid", "ssh")
    assert result["failed"] and "values" in result["msg"] and "dict" in result["msg"], result
    assert "Traceback" not in json.dumps(result)


def test_the_module_on_a_host_says_the_same():
    # Without the action plugin (a project copy that lacks action_plugins/), the module runs on the host.
    remote = {"ANSIBLE_ACTION_PLUGINS": "/nonexistent"}
    assert "invocation" in run(GOOD, "localhost", "local", env=remote)  # only a module's result says how it was called
    assert "invocation" not in run(GOOD, "localhost", "local")
    plugin, module = run(BAD, "localhost", "local"), run(BAD, "localhost", "local", env=remote)
    assert module["failed"] and module["msg"] == plugin["msg"] and module["errors"] == plugin["errors"]


def test_a_number_of_thousands_of_digits_is_refused_with_its_own_message():
    # Python refuses to convert it (over 4300 digits) with an error of its own; the check refuses it first.
    huge = {"context": "sglang_server", "values": {
        "sglang_server_port": {"value": "9" * 5000, "kind": "integer", "low": 1, "high": 65535}}}
    result = run(huge, "no-such-host.invalid", "ssh")
    assert result["failed"] and result["errors"] == ["sglang_server_port has more than 18 digits"], result
