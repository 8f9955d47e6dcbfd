"""The pure parts of the offline install and the device test bed: wheelhouse matching, the base-torch verdict,
and reading a rendered unit the way systemd does (scripts/device/unit_exec.py)."""
import os
import subprocess
import sys
import time

import pytest

from tests.helpers.script_module import load_file


wheelhouse = load_file("roles/sglang_install/files/wheelhouse_check.py", "wheelhouse_check")
smoke = load_file("roles/sglang_install/files/base_torch_smoke.py", "base_torch_smoke")
unit_exec = load_file("scripts/device/unit_exec.py", "unit_exec")

FILES = ["sgl_deep_gemm-0.1.5.post1-py3-none-manylinux2014_x86_64.whl",
         "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl",
         "jsonschema_specifications-2025.9.1-py3-none-any.whl", "README.txt", "broken.whl"]


def test_wheels_match_pins_as_pip_normalizes_them():
    pins = ["sgl-deep-gemm==0.1.5.post1", "sglang-kernel==0.4.5", "jsonschema-specifications==2025.09.01",
            "Sglang_Kernel==0.4.5"]
    assert wheelhouse.missing_pins(pins, FILES) == []


def test_a_pin_without_its_wheel_or_version_is_missing():
    pins = ["sglang-kernel==0.4.6", "transformers==5.12.1", "sgl-deep-gemm==0.1.5"]
    assert wheelhouse.missing_pins(pins, FILES) == pins


def test_wheelhouse_main_reports_an_unreadable_directory(capsys, tmp_path):
    assert wheelhouse.main(str(tmp_path / "absent"), "[]") == 1
    assert '"ok": false' in capsys.readouterr().out


@pytest.mark.parametrize("found,expected,ok", [("2.11.0+cu130", "2.11.0", True), ("2.11.0", "2.11.0", True),
                                               ("2.11.0+cu130", "2.11.0+cu130", True),
                                               ("2.11.0+cu128", "2.11.0+cu130", False), ("2.13.0", "2.11.0", False)])
def test_torch_version_verdict(found, expected, ok):
    assert smoke.version_matches(found, expected) is ok


def test_torch_from_inside_the_venv_or_a_shadowing_dist_is_refused(tmp_path):
    venv = str(tmp_path / "venv")
    inside = os.path.join(venv, "lib", "python3.12", "site-packages", "torch", "__init__.py")
    problems = smoke.judge("2.11.0", "2.11.0", inside, venv, ["torch-2.11.0.dist-info"])
    assert len(problems) == 2 and "from the venv itself" in problems[0] and "torch-2.11.0.dist-info" in problems[1]
    assert smoke.judge("2.11.0", "2.11.0+cu130", "/opt/torch/.venv/lib/torch/__init__.py", venv, []) == []


UNIT = """[Unit]
Description=SGLang
[Service]
Type=simple
User=sglang
Group=sglang
WorkingDirectory=/var/lib/sglang
EnvironmentFile=/etc/sglang/runtime.env
EnvironmentFile=-/etc/sglang/absent.env
ExecStart=/opt/sglang/current/bin/python -m sglang.launch_server --model-path /srv/m --tp-size 2
TimeoutStopSec=120
# a comment
[Install]
User=ignored
"""


def test_a_rendered_unit_is_read_as_systemd_reads_it():
    unit = unit_exec.parse_unit(UNIT)
    assert unit["User"] == "sglang" and unit["WorkingDirectory"] == "/var/lib/sglang"
    assert unit["ExecStart"][-4:] == ["--model-path", "/srv/m", "--tp-size", "2"]
    assert unit["EnvironmentFile"] == ["/etc/sglang/runtime.env", "-/etc/sglang/absent.env"]
    assert unit["TimeoutStopSec"] == 120  # the grace the e2e driver gives a server it stops, as systemd would
    with pytest.raises(ValueError, match="ExecStart"):
        unit_exec.parse_unit("[Service]\nUser=x\nWorkingDirectory=/\n")


def test_the_service_environment_is_the_files_plus_multicast_off(tmp_path):
    env_file = tmp_path / "runtime.env"
    env_file.write_text("# managed\nHOME=/var/lib/sglang\nNCCL_NVLS_ENABLE=1\nQUOTED=\"a b\"\n\n")
    unit = {"EnvironmentFile": [str(env_file), "-" + str(tmp_path / "absent.env")]}
    env, passed = unit_exec.service_env(unit, {"EXTRA": "1"}, host_env={"LD_LIBRARY_PATH": "/x", "SECRET": "no"})
    assert env["HOME"] == "/var/lib/sglang" and env["QUOTED"] == "a b" and env["EXTRA"] == "1"
    assert env["NCCL_NVLS_ENABLE"] == "0"  # the machine's rule wins over any file
    assert "SECRET" not in env and passed == ["LD_LIBRARY_PATH"] and env["PATH"] == unit_exec.SYSTEMD_PATH
    with pytest.raises(FileNotFoundError):
        unit_exec.service_env({"EnvironmentFile": [str(tmp_path / "absent.env")]}, host_env={})


def _group(tmp_path, script):
    """A process group like a started server: its leader is this test's child, as the e2e driver's are."""
    return subprocess.Popen([sys.executable, "-c", script], start_new_session=True, cwd=str(tmp_path))


def test_a_server_that_exits_on_term_is_terminated_even_before_it_is_reaped(tmp_path):
    # The leader stays a zombie until reaped, and killpg(pid, 0) still finds a zombie: the 1x H200 run of
    # 2026-12-02 06:43 UTC recorded its plain leg (started by the same driver) as killed after 60 s for that.
    proc = _group(tmp_path, "import time; time.sleep(60)")
    stopped = unit_exec.stop(proc.pid, grace_s=20, poll_s=0.1)
    assert stopped["result"] == "terminated" and stopped["seconds"] < 20
    assert proc.poll() is not None or unit_exec.process_gone(proc.pid)


def test_a_group_member_that_ignores_term_is_killed_after_the_grace(tmp_path):
    ready = tmp_path / "ignoring"
    member = tmp_path / "member.py"
    member.write_text("import pathlib, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                      "pathlib.Path(sys.argv[1]).touch()\ntime.sleep(60)\n")
    proc = _group(tmp_path, "import subprocess, sys, time\n"
                            "subprocess.Popen([sys.executable, %r, %r])\ntime.sleep(60)" % (str(member), str(ready)))
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:  # the member ignores TERM from here on
        time.sleep(0.05)
    assert ready.exists() and unit_exec.group_alive(proc.pid)
    stopped = unit_exec.stop(proc.pid, grace_s=1.5, poll_s=0.1)
    assert stopped["result"] == "killed" and stopped["seconds"] >= 1.5
    assert not unit_exec.group_alive(proc.pid)
    assert unit_exec.stop(proc.pid) == {"result": "gone", "seconds": 0.0}
