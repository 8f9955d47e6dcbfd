"""sglang_install's offline wheelhouse and base-interpreter options through real Ansible on this machine.

The base interpreter is a real Python whose site-packages hold a real torch: the controller-side benchmark
client venv (.cache/sglang-bench-client, built by `make deploy`), itself a venv, as PyTorch images ship theirs.
The wheelhouse holds one small wheel built here, so nothing is fetched.
"""
import json
import os
import subprocess
import sys
import zipfile

import pytest

from tests.helpers.ansible_run import REPO, failure, run_playbook, task_results

PLAYBOOK = "tests/playbooks/sglang_install_local.yml"
BASE = os.path.join(REPO, ".cache/sglang-bench-client/bin/python")
needs_base = pytest.mark.skipif(not os.path.exists(BASE), reason="no base Python with torch (.cache/sglang-bench-client)")


def base_torch_version():
    return subprocess.run([BASE, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True, check=True).stdout.strip()


def make_wheel(directory, name="sglang_install_probe", version="1.0"):
    """A minimal real wheel (one module, METADATA, WHEEL, RECORD) pip can install offline."""
    info = "%s-%s.dist-info" % (name, version)
    path = os.path.join(directory, "%s-%s-py3-none-any.whl" % (name, version))
    files = {name + ".py": "VALUE = 42\n",
             info + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
             info + "/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
        archive.writestr(info + "/RECORD", "".join("%s,,\n" % m for m in list(files) + [info + "/RECORD"]))
    return path


def install(tmp_path, lock_lines, **overrides):
    root = tmp_path / "opt"
    for sub in ("venvs", "locks"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    lock = tmp_path / "lock.txt"
    lock.write_text("\n".join(lock_lines) + "\n")
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir(exist_ok=True)
    make_wheel(str(wheelhouse))
    variables = {"sglang_layout_root": str(root), "sglang_install_lock": str(lock),
                 "sglang_install_python": BASE, "sglang_install_wheelhouse": str(wheelhouse)}
    variables.update(overrides)
    return run_playbook(PLAYBOOK, variables)


def result_of(report, name):
    for task, result in task_results(report):
        if task == name:
            return result
    raise AssertionError("no task %r" % name)


@needs_base
def test_venv_on_the_base_imports_the_base_torch_from_a_wheelhouse(tmp_path):
    version = base_torch_version()
    rc, report = install(tmp_path, ["sglang-install-probe==1.0"], sglang_install_base_site_packages=True,
                         sglang_install_base_torch_version=version.split("+")[0])
    assert rc == 0, failure(report)
    smoke = json.loads(result_of(report, "Prove the venv imports the base's torch at the intended version")["stdout"])
    assert smoke["ok"] and smoke["torch"].split("+")[0] == version.split("+")[0]
    venvs = list((tmp_path / "opt" / "venvs").iterdir())
    assert len(venvs) == 1 and venvs[0].name.endswith("-on-base")
    python = str(venvs[0] / "bin" / "python")
    # The venv's own package and the base's torch, from the base's site-packages (not copied into the venv).
    out = subprocess.run([python, "-c", "import sglang_install_probe, importlib.metadata as m, torch; "
                          "print(sglang_install_probe.VALUE, m.version('torch'), torch.__file__)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "42" and out[1] == version and ".cache/sglang-bench-client" in out[2]
    assert (venvs[0] / ".sglang-install-complete").exists()


@needs_base
def test_a_lock_that_pins_torch_is_refused_on_a_base(tmp_path):
    version = base_torch_version()
    rc, report = install(tmp_path, ["sglang-install-probe==1.0", "torch==" + version, "nvidia-nccl-cu13==2.28.9"],
                         sglang_install_base_site_packages=True, sglang_install_base_torch_version=version)
    assert rc != 0
    task, msg = failure(report)
    assert task == "Require the intended torch in the base and none of the base's packages in the lock"
    assert "would shadow it: torch, nvidia-nccl-cu13" in msg
    assert not list((tmp_path / "opt" / "venvs").iterdir())


@needs_base
def test_the_wrong_base_torch_is_refused(tmp_path):
    rc, report = install(tmp_path, ["sglang-install-probe==1.0"], sglang_install_base_site_packages=True,
                         sglang_install_base_torch_version="2.0.0")
    assert rc != 0
    task, msg = failure(report)
    assert task == "Require the intended torch in the base and none of the base's packages in the lock"
    assert "holds torch %s, 2.0.0 is intended" % base_torch_version() in msg


def test_a_base_torch_version_without_the_option_is_refused(tmp_path):
    rc, report = install(tmp_path, ["sglang-install-probe==1.0"], sglang_install_python=sys.executable,
                         sglang_install_base_torch_version="2.11.0")
    assert rc != 0
    assert failure(report)[0] == "Require a consistent base-interpreter setting"


def test_a_wheelhouse_missing_a_pin_stops_before_any_change(tmp_path):
    rc, report = install(tmp_path, ["sglang-install-probe==1.0", "not-in-the-wheelhouse==2.0"],
                         sglang_install_python=sys.executable)
    assert rc != 0
    task, msg = failure(report)
    assert task == "Require a complete wheelhouse"
    assert "not-in-the-wheelhouse==2.0" in msg and "sglang-install-probe" not in msg.split("serve")[-1].split(":")[1]
    assert not list((tmp_path / "opt" / "venvs").iterdir())


def test_a_plain_offline_install_from_the_wheelhouse(tmp_path):
    rc, report = install(tmp_path, ["sglang-install-probe==1.0"], sglang_install_python=sys.executable)
    assert rc == 0, failure(report)
    create = result_of(report, "Create the venv")
    assert "--system-site-packages" not in create["cmd"]
    pip = result_of(report, "Install exactly the pinned packages (--no-deps)")
    assert "--no-index" in pip["cmd"] and any(arg.startswith("--find-links=") for arg in pip["cmd"])
    assert result_of(report, "Prove the venv imports the base's torch at the intended version").get("skipped")


def test_an_index_url_with_a_token_reaches_pip_but_no_command_line_or_output(tmp_path):
    # A private index's URL often carries a token: pip gets it from a root-only config file, removed afterwards,
    # never from its arguments (readable by every local user in ps, printed when a task fails).
    index = tmp_path / "index" / "simple" / "sglang-install-probe"
    index.mkdir(parents=True)
    make_wheel(str(index))
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                               "--directory", str(tmp_path / "index")], stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().split(" port ")[1].split()[0]
        token = "tok3n-Xq81ZdfePw02"
        rc, report = install(tmp_path, ["sglang-install-probe==1.0"], sglang_install_python=sys.executable,
                             sglang_install_wheelhouse="",
                             sglang_install_pip_index_url="http://ci:%s@127.0.0.1:%s/simple/" % (token, port))
    finally:
        server.terminate()
        server.wait()
    assert rc == 0, (failure(report), result_of(report, "Install exactly the pinned packages (--no-deps)")["stderr"])
    assert token not in json.dumps(report)
    pip = result_of(report, "Install exactly the pinned packages (--no-deps)")
    assert not any("--index-url" in arg for arg in pip["cmd"])
    conf = result_of(report, "Make a private file for pip's index URLs")["path"]
    assert not os.path.exists(conf)  # removed after the install
    venv = next((tmp_path / "opt" / "venvs").iterdir())
    assert (venv / ".sglang-install-complete").exists()
