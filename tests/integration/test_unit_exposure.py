"""The units the roles render, rated by systemd's own exposure score (systemd-analyze security --offline).

Limits from issue 17: the server unit <= 2.5, the drift unit <= 3.0. The figures are printed (docs/security.md).
"""
import re
import shutil
import subprocess

import pytest

from tests.helpers.ansible_run import run_playbook

pytestmark = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")


def render(tmp_path, **variables):
    rc, report = run_playbook("tests/playbooks/render_units.yml", dict(variables, render_dir=str(tmp_path)))
    assert rc == 0, report
    return tmp_path


def exposure(path):
    proc = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(path)],
                          capture_output=True, text=True, check=False)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d)", proc.stdout)
    assert match, proc.stdout + proc.stderr
    print("%s: %s" % (path.name, match.group(1)))
    return float(match.group(1))


@pytest.mark.parametrize("variables", [{}, {"sglang_server_api_key_file": "/etc/sglang/api-key",
                                            "sglang_server_host": "10.0.0.5"}])
def test_server_unit_exposure(tmp_path, variables):
    units = render(tmp_path, **variables)
    assert exposure(units / "sglang.service") <= 2.5


@pytest.mark.parametrize("variables", [{}, {"drift_schedule_user": "root", "drift_schedule_group": "root"}])
def test_drift_unit_exposure(tmp_path, variables):
    units = render(tmp_path, **variables)
    assert exposure(units / "sglang-drift.service") <= 3.0


def test_api_key_goes_by_options_file_not_argument(tmp_path):
    text = (render(tmp_path, sglang_server_api_key_file="/etc/sglang/api-key") / "sglang.service").read_text()
    exec_start = [line for line in text.splitlines() if line.startswith("ExecStart=")][0]
    assert exec_start.endswith(" --config /etc/sglang/api-key.yaml")
    assert "--api-key" not in text and "EnvironmentFile=/etc/sglang/api-key" not in text


def test_device_access_is_nvidia_only(tmp_path):
    text = (render(tmp_path) / "sglang.service").read_text()
    assert "DevicePolicy=closed" in text
    assert [line for line in text.splitlines() if line.startswith("DeviceAllow=")] == ["DeviceAllow=char-nvidia* rw"]


@pytest.mark.parametrize("user, writable", [
    ("sglang-drift", "/var/lib/prometheus/node-exporter/sglang_drift.d"),
    ("root", "/var/lib/prometheus/node-exporter")])
def test_drift_unit_writes_node_exporters_folder_only_as_root(tmp_path, user, writable):
    # A check user other than root writes its textfile in its own folder; node_exporter's folder (where root writes
    # sglang_deploy.prom) is writable by the unit only when the check runs as root anyway.
    text = (render(tmp_path, drift_schedule_user=user, drift_schedule_group=user) / "sglang-drift.service").read_text()
    paths = [line for line in text.splitlines() if line.startswith("ReadWritePaths=")][0].split("=", 1)[1].split()
    assert paths[-1] == "-" + writable
