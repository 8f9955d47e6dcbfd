"""sglang_nccl_settings against hostile and malformed input: a clear refusal, no traceback, nothing written."""
import os
import stat
import sys

import pytest

from tests.helpers import wheels
from tests.helpers.ansible_run import run_module, run_module_direct

pytestmark = pytest.mark.wheels

FACTS = {"nvlink": False, "all_p2p_ok": True, "gpu_count": 2,
         "topology": {"gpus": ["GPU0", "GPU1"],
                      "matrix": {"GPU0": {"GPU0": "X", "GPU1": "PHB"}, "GPU1": {"GPU0": "PHB", "GPU1": "X"}}}}


@pytest.fixture(scope="module")
def venv(tmp_path_factory, pristine_venv_of):
    # One test writes settings into it for real: this module's own copy.
    return wheels.copy_venv(pristine_venv_of(("sglang", "0.5.21")), tmp_path_factory.mktemp("nccl-hostile") / "venv")


def tree(*roots):
    """Every path under the roots with its bytes and mode: what 'unchanged' means."""
    found = {}
    for root in roots:
        for directory, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                with open(path, "rb") as handle:
                    found[path] = (handle.read(), os.stat(path).st_mode)
    return found


def refused(venv, tmp_path, **args):
    etc = tmp_path / "etc"
    etc.mkdir(exist_ok=True)
    site = wheels.site_packages(venv)
    before = tree(str(etc), site)
    base = {"venv": venv, "env_file": str(etc / "nccl.env"), "gpu_facts": FACTS}
    result = run_module("sglang_nccl_settings", dict(base, **args))
    assert result.get("failed"), result
    assert "Traceback" not in result.get("msg", "") and "module_stderr" not in result, result
    assert tree(str(etc), site) == before
    return result["msg"]


@pytest.mark.parametrize("settings,words", [
    ({"NCCL_DEBUG_SUBSYS": "INIT\nLD_PRELOAD=/tmp/evil.so"}, ["NCCL_DEBUG_SUBSYS", "newline"]),
    ({"NCCL_TOPO_FILE": "/etc/nccl/topo.xml\nLD_PRELOAD=/tmp/evil.so"}, ["NCCL_TOPO_FILE", "newline"]),
    ({"NCCL_P2P_LEVEL": "PHB\n"}, ["NCCL_P2P_LEVEL", "newline"]),
    ({"NCCL_TOPO_FILE": "/etc/nccl/my topo.xml"}, ["NCCL_TOPO_FILE", "whitespace"]),
    ({"NCCL_TOPO_FILE": "$HOME/topo.xml"}, ["NCCL_TOPO_FILE", "expansion"]),
    ({"NCCL_DEBUG_SUBSYS": 'INIT";import("os");"'}, ["NCCL_DEBUG_SUBSYS", "quote"]),
    ({"NCCL_BUFFSIZE": str(1 << 40)}, ["NCCL_BUFFSIZE", "65536 to"]),
    ({"NCCL_BUFFSIZE": "4_194_304"}, ["NCCL_BUFFSIZE"]),
    ({"NCCL_DEBUG": {"value": "WARN", "reason": "x\nLD_PRELOAD=/tmp/evil.so"}}, ["NCCL_DEBUG.reason", "newline"]),
    ({"NCCL_X\nLD_PRELOAD": "1"}, ["settings name", "newline"]),
    ({"NCCL-X": "1"}, ["settings name", "not an environment variable name"]),
])
def test_hostile_settings_are_refused_before_anything_is_written(venv, tmp_path, settings, words):
    msg = refused(venv, tmp_path, settings=settings)
    assert msg.startswith("NCCL settings refused, nothing written")
    for word in words:
        assert word in msg, msg


@pytest.mark.parametrize("hook_name", ["../../../../tmp/evil", "os;import x", "a.b", "x\nimport os", ""])
def test_hook_name_must_be_an_identifier(venv, tmp_path, hook_name):
    msg = refused(venv, tmp_path, hook_name=hook_name)
    assert "hook_name" in msg and ("identifier" in msg or "empty" in msg or "newline" in msg), msg


@pytest.mark.parametrize("hook_name,words", [
    ("typing", ["hook_name typing is a module of the venv's Python's standard library", "never run"]),
    ("sitecustomize", ["hook_name sitecustomize is the name site imports for its own customization"]),
    ("sglang", ["hook_name sglang is already an installed module of the venv", "site-packages/sglang"]),
])
def test_hook_name_that_the_venv_already_imports_is_refused(venv, tmp_path, hook_name, words):
    """Issue 35: the module reported success and the hook never ran (or replaced a package)."""
    msg = refused(venv, tmp_path, hook_name=hook_name)
    for word in words:
        assert word in msg, msg


@pytest.mark.parametrize("settings,words", [
    ({"NCCL_P2P_LEVEL": "\u017fys"}, ["NCCL_P2P_LEVEL", "U+017F", "ASCII"]),
    ({"NCCL_ALGO": "allreduce:\u212aing"}, ["NCCL_ALGO", "ASCII"]),
    ({"NCCL_P2P_DISABLE": "1 "}, ["NCCL_P2P_DISABLE", "whitespace"]),
])
def test_values_the_hook_and_the_env_file_would_read_differently_are_refused(venv, tmp_path, settings, words):
    """Issue 35: checked after case mapping or stripping, written as given."""
    msg = refused(venv, tmp_path, settings=settings)
    for word in words:
        assert word in msg, msg


def test_a_lone_surrogate_systemd_cannot_read_is_refused(venv, tmp_path):
    """Issue 35: the hook would set it, systemd refuses the line (invalid UTF-8). The controller refuses to pass one
    at all, so the module runs as Ansible runs it on the host (its own process, its arguments file)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    site = wheels.site_packages(venv)
    before = tree(str(etc), site)
    result, stderr = run_module_direct("sglang_nccl_settings", {
        "venv": venv, "env_file": str(etc / "nccl.env"), "gpu_facts": FACTS,
        "settings": {"NCCL_DEBUG_SUBSYS": "INIT\udc80"}}, tmp_path)
    assert result.get("failed") and "Traceback" not in stderr, (result, stderr)
    assert "NCCL_DEBUG_SUBSYS holds a lone surrogate (U+DC80)" in result["msg"], result["msg"]
    assert tree(str(etc), site) == before


@pytest.mark.parametrize("env_file,words", [
    ("nccl.env", ["env_file", "absolute"]),
    ("", ["env_file", "empty"]),
    ("/etc/sglang/../passwd", ["env_file", "normalized"]),
    ("/etc/sglang/nccl env", ["env_file", "whitespace"]),
])
def test_env_file_location_is_checked(venv, tmp_path, env_file, words):
    msg = refused(venv, tmp_path, env_file=env_file)
    for word in words:
        assert word in msg, msg


def test_env_file_that_is_a_directory(venv, tmp_path):
    (tmp_path / "etc" / "d").mkdir(parents=True)
    msg = refused(venv, tmp_path, env_file=str(tmp_path / "etc" / "d"))
    assert "is a directory" in msg


def test_env_file_whose_parent_is_a_file(venv, tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "f").write_text("x")
    msg = refused(venv, tmp_path, env_file=str(tmp_path / "etc" / "f" / "nccl.env"))
    assert "is not a directory" in msg


@pytest.mark.parametrize("facts,words", [
    ({"topology": "GPU0 X PHB"}, ["gpu_facts.topology", "mapping"]),
    ({"all_p2p_ok": True, "topology": {"gpus": "GPU0", "matrix": {}}}, ["gpu_facts.topology.gpus"]),
    ({"all_p2p_ok": True, "topology": {"gpus": ["GPU0", "GPU1"], "matrix": {"GPU0": "PHB"}}},
     ["gpu_facts.topology.matrix"]),
    ({"all_p2p_ok": True, "topology": {"gpus": ["GPU0", "GPU1"], "matrix": {"GPU0": {"GPU1": 3}}}},
     ["gpu_facts.topology.matrix"]),
])
def test_malformed_topology_facts(venv, tmp_path, facts, words):
    msg = refused(venv, tmp_path, gpu_facts=facts)
    for word in words:
        assert word in msg, msg


def test_modes_are_enforced_on_every_run(venv, tmp_path):
    args = {"venv": venv, "env_file": str(tmp_path / "etc" / "sglang" / "nccl.env"), "gpu_facts": FACTS}
    first = run_module("sglang_nccl_settings", args)
    assert first["changed"] and first["env_file_changed"], first
    assert stat.S_IMODE(os.stat(tmp_path / "etc" / "sglang").st_mode) == 0o755
    hook_py, hook_pth, env_file = first["files"]
    os.chmod(hook_pth, 0o666)
    os.chmod(env_file, 0o600)
    checked = run_module("sglang_nccl_settings", args, check=True)
    assert checked["changed"] and sorted(checked["modes_fixed"]) == sorted([hook_pth, env_file])
    # Modes alone leave what the server's fingerprint reads as it was: no restart is predicted from them.
    assert checked["env_file_changed"] is False
    assert stat.S_IMODE(os.stat(hook_pth).st_mode) == 0o666  # check mode touched nothing
    fixed = run_module("sglang_nccl_settings", args)
    assert fixed["changed"] and sorted(fixed["modes_fixed"]) == sorted([hook_pth, env_file])
    for path in (hook_py, hook_pth, env_file):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert run_module("sglang_nccl_settings", args)["changed"] is False
    os.chmod(hook_py, 0o600)
    with open(env_file, "a") as handle:
        handle.write("NCCL_ALGO=Ring\n")  # a hand edit: a deploy writes the file back, and the server restarts
    edited = run_module("sglang_nccl_settings", args, check=True)
    assert edited["changed"] and edited["env_file_changed"] and edited["modes_fixed"] == [hook_py]
    removed = run_module("sglang_nccl_settings", dict(args, state="absent"), check=True)
    assert removed["changed"] and removed["env_file_changed"]


def test_hook_name_that_is_a_python_keyword(venv, tmp_path):
    msg = refused(venv, tmp_path, hook_name="import")  # its .pth line "import import" would be a syntax error
    assert "hook_name" in msg and "keyword" in msg, msg


@pytest.mark.parametrize("state", ["present", "absent"])
def test_hook_name_of_another_packages_module_is_neither_replaced_nor_removed(venv, tmp_path, state):
    other = os.path.join(wheels.site_packages(venv), "someone_elses_module.py")
    with open(other, "w") as handle:
        handle.write("VALUE = 1\n")
    try:
        msg = refused(venv, tmp_path, hook_name="someone_elses_module", state=state)
        assert other + " exists and was not written by this role" in msg, msg
        with open(other) as handle:
            assert handle.read() == "VALUE = 1\n"
    finally:
        os.remove(other)


def test_an_engine_source_this_python_cannot_parse(tmp_path):
    # SGLang's start-up overrides are read from its source; source this Python cannot parse (a newer Python's
    # syntax, here plainly broken so that any Python refuses it) is refused with a message, not a traceback.
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    engine = site / "sglang" / "srt" / "entrypoints" / "engine.py"
    engine.parent.mkdir(parents=True)
    engine.write_text("def broken(:\n")
    (tmp_path / "venv" / "bin").mkdir()
    os.symlink(sys.executable, str(tmp_path / "venv" / "bin" / "python"))
    msg = refused(str(tmp_path / "venv"), tmp_path)
    assert "engine.py cannot be parsed" in msg and "ansible_python_interpreter" in msg, msg


def test_nccl_variables_of_the_servers_runtime_environment_are_checked_too(venv, tmp_path):
    # They reach the same processes (runtime.env comes first in the unit): LL128 without NVLink is refused as the
    # role's own setting would be, and a name set both places to other values is refused by name.
    msg = refused(venv, tmp_path, server_environment={"NCCL_PROTO": "LL128", "HF_HUB_OFFLINE": "1"})
    assert "NCCL_PROTO" in msg and "checked with them: NCCL_PROTO from the server's runtime environment" in msg, msg
    msg = refused(venv, tmp_path, settings={"NCCL_DEBUG": "WARN"}, server_environment={"NCCL_DEBUG": "INFO"})
    assert "NCCL_DEBUG is INFO in the server's runtime environment (sglang_install_environment) and WARN here" in msg
    msg = refused(venv, tmp_path, server_environment={"NCCL_DEBUG": "INFO\nLD_PRELOAD=/tmp/x.so"})
    assert "NCCL_DEBUG" in msg and "newline" in msg, msg


def test_the_same_value_in_both_places_is_accepted_and_not_written_twice(venv, tmp_path):
    etc = tmp_path / "etc"
    result = run_module("sglang_nccl_settings", {
        "venv": venv, "env_file": str(etc / "nccl.env"), "gpu_facts": FACTS, "settings": {"NCCL_NVLS_ENABLE": "0"},
        "server_environment": {"NCCL_NVLS_ENABLE": "0", "HOME": "/var/lib/sglang"}}, check=True)
    assert not result.get("failed"), result
    assert set(result["settings"]) >= {"NCCL_NVLS_ENABLE"} and "HOME" not in result["settings"]
