"""The comparison without Ansible's module wrapper (module_utils/converge_probe.py, run by the action plugin's
PROBE_BOOTSTRAP): it runs in a Python that has no Ansible, gives the module's answer, and fails with a message."""
import ast
import json
import os
import subprocess
import sys

import pytest

from action_plugins import sglang_converge_state as plugin
from module_utils import converge_probe
from module_utils import converge_state as cs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _own_imports(source):
    """The project's module_utils a source imports (from ansible.module_utils import X)."""
    return [alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("ansible.module_utils") for alias in node.names]


def test_the_probe_modules_are_closed_and_each_comes_after_what_it_imports():
    package, modules = plugin.probe_sources(REPO)
    assert package == "ansible.module_utils"
    names = [name for name, _ in modules]
    assert names == list(plugin.PROBE_MODULES) and names[-1] == "converge_probe"
    for index, (name, source) in enumerate(modules):
        imported = _own_imports(source)
        assert "basic" not in imported, name  # the wrapper's start-up is what the probe leaves out
        assert set(imported) <= set(names[:index]), (name, imported)


def _probe(request, tmp_path):
    """Run the bootstrap as the host would, in a Python without site-packages (no Ansible importable)."""
    package, modules = plugin.probe_sources(REPO)
    done = subprocess.run([sys.executable, "-S", "-c", plugin.PROBE_BOOTSTRAP], cwd=str(tmp_path), check=False,
                          input=json.dumps({"package": package, "modules": modules, "request": request}),
                          capture_output=True, text=True)
    return plugin.probe_answer({"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr})


@pytest.fixture(name="converged")
def fixture_converged(tmp_path):
    """A host with one file, recorded as converged; returns (record path, the file, the inputs)."""
    watched, record = tmp_path / "runtime.env", tmp_path / "converged.json"
    watched.write_text("HOME=/var/lib/sglang\n")
    inputs = {"install": {"var sglang_install_version": "a1"}}
    covers = {"install": {"files": [str(watched)]}}
    record.write_text(cs.render(inputs, covers, cs.observe(covers, None, None, None)))
    return record, watched, inputs


def test_without_ansible_it_gives_the_modules_answer(converged, tmp_path):
    record, watched, inputs = converged
    params = {"record": str(record), "inputs": inputs, "forget": True}
    assert _probe({"params": params, "check_mode": False}, tmp_path) == converge_probe.compare(params, False)
    assert converge_probe.compare(params, False)["matched"] is True

    watched.write_text("HOME=/tmp\n")
    dry = _probe({"params": params, "check_mode": True}, tmp_path)
    assert dry == {"changed": True, "matched": False, "forgotten": True,
                   "differences": {"install": ["file %s: content differs from its converge" % watched]}}
    assert record.exists()  # check mode: says it would forget, keeps the record
    assert _probe({"params": params, "check_mode": False}, tmp_path)["forgotten"] and not record.exists()


@pytest.mark.parametrize("params, message", [
    ({"record": "converged.json", "inputs": {}}, "record must be an absolute path"),
    ({"record": "/var/lib/sglang/c.json", "inputs": []}, "inputs must be a mapping"),
    ({"record": "/var/lib/sglang/c.json", "inputs": {}, "ignore_covers": ["gpus"]}, "ignore_covers: gpus is none of"),
    ({"record": "/var/lib/sglang/c\x00.json", "inputs": {}}, "NUL byte"),
    ({"record": "/var/lib/sglang/c.json", "inputs": {}, "covers": {}}, "unknown option covers"),
])
def test_a_request_it_cannot_use_fails_with_a_message(params, message, tmp_path):
    answer = _probe({"params": params, "check_mode": False}, tmp_path)
    assert answer["failed"] and message in answer["msg"] and "Traceback" not in answer["msg"], answer


def test_a_record_it_cannot_read_fails_with_its_message(tmp_path):
    record = tmp_path / "converged.json"
    record.write_text("{not json")
    answer = _probe({"params": {"record": str(record), "inputs": {}}, "check_mode": False}, tmp_path)
    assert answer["failed"] and answer["msg"].startswith("sglang_converge_state: ") and "Traceback" not in answer["msg"]
    assert _probe({"check_mode": False}, tmp_path) == {
        "failed": True, "msg": "sglang_converge_state: unreadable request (KeyError: 'params')"}


def test_a_host_that_gives_no_answer_is_a_failure_with_its_exit_and_error():
    answer = plugin.probe_answer({"rc": 127, "stdout": "", "stderr": "sh: 1: /usr/bin/python3: not found\n"})
    assert answer["failed"] and answer["rc"] == 127
    assert answer["msg"].endswith("gave no answer (exit 127): sh: 1: /usr/bin/python3: not found")


def test_an_installed_collection_runs_its_own_module_utils(tmp_path):
    # the collection build rewrites the imports: the bootstrap registers the sources under that package
    target = tmp_path / "plugins" / "module_utils"
    target.mkdir(parents=True)
    collection_package = "ansible_collections.gpufleet.sglang.plugins.module_utils"
    for name in plugin.PROBE_MODULES:
        with open(os.path.join(REPO, "module_utils", name + ".py"), encoding="utf-8") as handle:
            source = handle.read().replace("from ansible.module_utils import", "from %s import" % collection_package)
        (target / (name + ".py")).write_text(source)
    assert plugin.probe_sources(str(tmp_path))[0] == collection_package


@pytest.mark.parametrize("interpreter, usable", [
    ("/usr/bin/python3", True), ("/usr/bin/env python3", True), ("/opt/py-3.11/bin/python3.11", True),
    ("python3", False), ("/usr/bin/python3; rm -rf /", False), ("/usr/bin/python3 $(id)", False),
    ("/usr/bin/python3\n", False)])
def test_only_an_absolute_plain_interpreter_goes_on_the_command_line(interpreter, usable):
    assert bool(plugin.INTERPRETER.match(interpreter)) is usable


def _fake_python(folder, name, marker):
    """An executable NAME in FOLDER that notes it ran (MARKER), then runs this Python without site-packages."""
    path = folder / name
    path.write_text("#!/bin/sh\ntouch %s\nexec %s -S \"$@\"\n" % (marker, sys.executable))
    path.chmod(0o755)
    return path


def test_discovery_runs_the_first_fallback_the_host_has_as_ansible_would(converged, tmp_path):
    record, _, inputs = converged
    folder = tmp_path / "bin"
    folder.mkdir()
    _fake_python(folder, "python3.99", tmp_path / "first")
    _fake_python(folder, "python3.98", tmp_path / "second")
    command = plugin.probe_command(["no-such-python", "python3.99", "python3.98"])
    package, modules = plugin.probe_sources(REPO)
    params = {"record": str(record), "inputs": inputs}
    done = subprocess.run(["/bin/sh", "-c", command], cwd=str(tmp_path), check=False, capture_output=True, text=True,
                          input=json.dumps({"package": package, "modules": modules,
                                            "request": {"params": params, "check_mode": True}}),
                          env=dict(os.environ, PATH="%s:/usr/bin:/bin" % folder))
    answer = plugin.probe_answer({"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr})
    assert answer == converge_probe.compare(params, True) and answer["matched"] is True, answer
    assert (tmp_path / "first").exists() and not (tmp_path / "second").exists()


def test_discovery_ends_at_usr_bin_python3_as_ansible_does():
    assert plugin.probe_command([]).startswith("/usr/bin/python3 -c ")
    command = plugin.probe_command(["python3.13", "/usr/bin/python3"])
    assert command.startswith("python=/usr/bin/python3; for name in python3.13 /usr/bin/python3; do ")


@pytest.mark.parametrize("name, usable", [
    ("python3.13", True), ("/usr/libexec/platform-python", True), ("python3; id", False), ("$(id)", False),
    ("python 3", False), ("", False)])
def test_only_plain_fallback_names_go_on_the_command_line(name, usable):
    assert bool(plugin.FALLBACK_NAME.match(name)) is usable
