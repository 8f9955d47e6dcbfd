"""roles/sglang_drift's probes and role rescue through real Ansible on this machine (check mode), read by
module_utils/drift_report.py.

A deployed host is simulated: a venv (python -m venv, a fake dist-info and, for the NCCL hook, a .pth file) with
its lock under a temporary sglang_layout_root, a `current` symlink, the driver record, a unit file, a stub HTTP
server for /health_generate and /server_info, and a `systemctl` stand-in on PATH that answers `show`.
"""
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from ansible.module_utils import drift_report as dr
from tests.helpers.ansible_run import REPO, run_playbook

PLAYBOOK = "tests/playbooks/drift_probes_local.yml"


class Stub(http.server.BaseHTTPRequestHandler):
    health = 200
    info = {}

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path == "/health_generate":
            code, body = type(self).health, b""
        elif self.path == "/server_info":
            code, body = 200, json.dumps(type(self).info).encode()
        else:
            code, body = 404, b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.HTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Stub.health, Stub.info = 200, {}
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def host(tmp_path):
    """A deployed host's files under tmp_path; returns (extra vars, env, paths)."""
    root = tmp_path / "opt" / "sglang"
    venv = root / "venvs" / "lab-b-bbbbbbbbbbbb"
    (root / "locks").mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    dist = site / "fake_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.0\n")
    (root / "locks" / "lab-b-bbbbbbbbbbbb.txt").write_text("# lock\nfake-pkg==1.0\n")
    os.symlink(str(venv), str(root / "current"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "deployed-driver").write_text('{"driver_version": "580.65.06"}\n')
    bindir = tmp_path / "bin"
    bindir.mkdir()
    systemctl = bindir / "systemctl"
    systemctl.write_text("#!/bin/sh\n[ \"$1\" = show ] || exit 1\n"
                         "printf 'Id=sglang.service\\nLoadState=loaded\\nActiveState=%s\\nSubState=running\\n"
                         "UnitFileState=enabled\\nMainPID=4242\\n' \"${FAKE_ACTIVE:-active}\"\n")
    systemctl.chmod(0o755)
    unit = tmp_path / "sglang.service"
    variables = {
        "sglang_layout_root": str(root),
        "sglang_layout_home": str(tmp_path / "home"),
        "sglang_layout_state_dir": str(tmp_path / "home"),
        "sglang_install_active_venv": str(root / "venvs" / "lock-a-aaaaaaaaaaaa"),  # `current` points elsewhere
        "drift_test_nccl_effective": {},
        "nvidia_gpu": {"driver_version": "580.65.06"},
        "sglang_layout_unit_dir": str(tmp_path),
        "sglang_server_service": "sglang",
        "sglang_server_host": "127.0.0.1",
        "sglang_server_api_key_file": "",
        "sglang_server_restart_needed": False,
        "fake_fails": False,
        "fake_signal": True,
        "fake_role": "fusion_patch",
        "fake_message": "flashinfer-python 0.6.17 in /opt/sglang/current is older than 0.6.18; refusing to patch",
    }
    env = {"PATH": str(bindir) + os.pathsep + os.environ.get("PATH", "")}
    return variables, env, {"root": root, "venv": venv, "site": site, "unit": unit, "tmp": tmp_path}


def write_unit(unit, port, extra=""):
    unit.write_text("[Service]\nExecStart=/opt/sglang/current/bin/python -m sglang.launch_server "
                    "--model-path /srv/models/k --tp-size 2 --host 127.0.0.1 --port %d "
                    "--flashinfer-allreduce-fusion-backend=trtllm%s\n" % (port, extra))


def drift(variables, env, port, project=REPO, **overrides):
    variables = dict(variables, sglang_server_port=port, **overrides)
    env = dict(env, FAKE_ACTIVE=overrides.pop("fake_active", "active")) if "fake_active" in overrides else env
    rc, report = run_playbook(PLAYBOOK, variables, env=env, check=True, project=project)
    return rc, dr.analyse(report)["localhost"], report


def items(info):
    """(category, the task name without its role prefix, counted) per item."""
    return [(item["category"], item["task"].split(" : ", 1)[-1], item["counted"]) for item in info["items"]]


def check(info, category, needle):
    """The one check of CATEGORY whose item names NEEDLE."""
    found = [c for c in info["checks"] if c["category"] == category and needle in str(c["item"])]
    assert len(found) == 1, info["checks"]
    return found[0]


def lock_checks(report):
    """sglang_install's lock check results (its task file), as the drift run recorded them."""
    return [task["hosts"]["localhost"] for play in report["plays"] for task in play["tasks"]
            if "roles/sglang_install/tasks/lock_check.yml" in task["task"]["path"]]


def serving(port, tp_size=2, backend="trtllm"):
    Stub.info = {"tp_size": tp_size, "model_path": "/srv/models/k", "flashinfer_allreduce_fusion_backend": backend}


def test_a_host_as_deployed_is_clean(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server)
    rc, info, report = drift(variables, env, server)
    assert rc == 0 and info["status"] == "clean", info["items"]
    assert [(r["rc"], r["changed"]) for r in lock_checks(report)] == [(0, False)]
    assert check(info, "nccl", "NCCL_")["actual"] == {}
    assert check(info, "driver", "NVIDIA driver")["expected"] == "580.65.06"
    assert check(info, "service", "/health_generate")["actual"] == 200
    args = check(info, "service", "/server_info")
    assert args["expected"] == {"tp_size": 2, "model_path": "/srv/models/k", "flashinfer_allreduce_fusion_backend": "trtllm"}
    assert args["actual"] == args["expected"]


def test_host_drift_packages_nccl_driver(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server)
    (paths["root"] / "locks" / "lab-b-bbbbbbbbbbbb.txt").write_text("fake-pkg==2.0\nsglang==0.5.21\n")
    (paths["site"] / "nccl_test_hook.pth").write_text("import os; os.environ.setdefault('NCCL_P2P_LEVEL', 'SYS')\n")
    rc, info, _report = drift(variables, env, server, drift_test_nccl_effective={"NCCL_P2P_LEVEL": "PHB"},
                              nvidia_gpu={"driver_version": "590.10.01"})
    assert rc == 0 and info["status"] == "drift"
    assert info["counts"] == {"packages": 1, "nccl": 1, "driver": 1}
    by_category = {item["category"]: item for item in info["items"]}
    assert by_category["packages"]["kind"] == "change"
    assert by_category["packages"]["summary"] == "fake-pkg: lock 2.0, installed 1.0; missing sglang; missing import sglang"
    assert by_category["nccl"]["expected"] == {"NCCL_P2P_LEVEL": "PHB"}
    assert by_category["nccl"]["actual"] == {"NCCL_P2P_LEVEL": "SYS"}
    assert (by_category["driver"]["expected"], by_category["driver"]["actual"]) == ("580.65.06", "590.10.01")


def test_no_driver_record_is_not_drift(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server)
    os.unlink(str(paths["tmp"] / "home" / "deployed-driver"))
    rc, info, _report = drift(variables, env, server)
    assert info["status"] == "clean"
    check = [c for c in info["checks"] if c["category"] == "driver"][0]
    assert check["drifted"] is False and "missing or empty" in check["note"]


def test_server_unhealthy_and_serving_other_arguments(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server, tp_size=4, backend=None)
    Stub.health = 503
    rc, info, _report = drift(variables, env, server)
    assert info["status"] == "drift"
    assert items(info) == [
        ("service", "Drift probe: /health_generate answers 200", True),
        ("service", "Drift probe: the server serves the arguments of its unit's ExecStart", False),
    ]
    # alone, served arguments that differ from the unit's ExecStart count (a drop-in overriding ExecStart)
    Stub.health = 200
    rc, info, _report = drift(variables, env, server)
    assert items(info) == [("service", "Drift probe: the server serves the arguments of its unit's ExecStart", True)]
    assert info["items"][0]["actual"] == {"tp_size": 4, "model_path": "/srv/models/k",
                                          "flashinfer_allreduce_fusion_backend": None}


def test_service_stopped(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    rc, info, _report = drift(variables, env, server, fake_active="inactive", sglang_server_restart_needed=True)
    assert info["status"] == "drift" and info["counts"] == {"service": 1}
    assert items(info) == [
        ("service", "Drift probe: the sglang service is active and enabled", True),
        ("service", "Drift probe: no restart pending (what the server runs was proven by the last deploy)", False),
    ]
    assert info["items"][0]["actual"] == "inactive/enabled"


def test_a_drift_signal_is_recorded_and_the_host_goes_on(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server)
    rc, info, report = drift(variables, env, server, fake_fails=True)
    assert rc == 0 and info["status"] == "drift" and info["counts"] == {"packages": 1}
    item = info["items"][0]
    assert item["item"] == "fusion_patch : Admit SM120 to FlashInfer allreduce fusion (present)"
    assert item["actual"] == variables["fake_message"]
    assert any(task["task"]["name"] == "Still running" for play in report["plays"] for task in play["tasks"])


def test_a_drift_signal_in_one_item_of_a_loop_is_recorded_with_that_items_message(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server)
    message = ("m revision r1: /models/m/r1 does not hold the revision, so it is not used: model.safetensors has 2 "
               "bytes, the manifest says 0. ")
    rc, info, _report = drift(variables, env, server, fake_fails=True, fake_loop=True, fake_role="sglang_model",
                              fake_message=message)
    assert rc == 0 and info["status"] == "drift" and info["counts"] == {"model": 1}, info
    assert info["items"][0]["item"] == "sglang_model : Fetch and verify each model revision"
    assert info["items"][0]["actual"] == message


def test_any_other_role_failure_is_an_error(host, server):
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server)
    rc, info, report = drift(variables, env, server, fake_fails=True, fake_signal=False)
    assert rc != 0 and info["status"] == "error"
    assert info["errors"] == ["fusion_patch : Require a usable Python failed: /usr/bin/python3 on localhost is "
                              "missing or older than 3.10"]
    assert not any(task["task"]["name"] == "Still running" for play in report["plays"] for task in play["tasks"])
    # the same task in a role without that signal is an error too
    rc, info, _report = drift(variables, env, server, fake_fails=True, fake_role="gpu_preflight")
    assert info["status"] == "error"


TASK_NAME = re.compile(r"^(\s*- name: ).*$", re.MULTILINE)


def renamed_copy(tmp_path):
    """A copy of the project whose every task (and block) in every role has another name."""
    copy = tmp_path / "renamed"
    copy.mkdir()
    for name in ("ansible.cfg", "library", "module_utils", "filter_plugins", "action_plugins", "roles",
                 "tests/playbooks"):
        source = os.path.join(REPO, name)
        if os.path.isdir(source):
            shutil.copytree(source, str(copy / name), ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, str(copy / name))
    count = 0
    for path in sorted(copy.glob("**/tasks/*.yml")):
        text = path.read_text()
        renamed, found = TASK_NAME.subn(lambda m: m.group(1) + "Step %d of %s" % (m.start(), path.stem), text)
        path.write_text(renamed)
        count += found
    return copy, count


def judged(info):
    """What a report says about a host, without the task names it quotes."""
    return {"status": info["status"], "counts": info["counts"],
            "items": sorted((item["kind"], item["category"], item["counted"], json.dumps(item.get("expected")),
                             json.dumps(item.get("actual")), "" if item["kind"] == "probe" else item["summary"])
                            for item in info["items"]),
            "checks": sorted((check["category"], check["drifted"], json.dumps(check["actual"]))
                             for check in info["checks"])}


def test_renaming_every_task_changes_no_verdict_category_or_finding(host, server, tmp_path):
    """Categories are set where findings are made, never read from task names: a copy of the project whose every
    task is renamed ("Drift probe: ..." included) gives the same report."""
    variables, env, paths = host
    write_unit(paths["unit"], server)
    serving(server)
    Stub.health = 503
    (paths["root"] / "locks" / "lab-b-bbbbbbbbbbbb.txt").write_text("fake-pkg==2.0\n")
    (paths["site"] / "nccl_test_hook.pth").write_text("import os; os.environ.setdefault('NCCL_P2P_LEVEL', 'SYS')\n")
    scenario = dict(drift_test_nccl_effective={"NCCL_P2P_LEVEL": "PHB"}, nvidia_gpu={"driver_version": "590.10.01"},
                    fake_fails=True, sglang_server_restart_needed=True)
    _rc, original, _report = drift(variables, env, server, **scenario)
    copy, count = renamed_copy(tmp_path)
    assert count > 100
    _rc, renamed, report = drift(variables, env, server, project=str(copy), **scenario)
    names = [task["task"]["name"] for play in report["plays"] for task in play["tasks"]]
    assert not any("drift probe" in name.lower() for name in names) and any("Step " in name for name in names)
    assert judged(renamed) == judged(original)
    assert original["counts"] == {"packages": 2, "nccl": 1, "driver": 1, "service": 1}
