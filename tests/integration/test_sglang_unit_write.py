"""sglang_server's unit write (tasks/unit.yml): verified by systemd-analyze before it is installed, except on a
render-only host (sglang_server_render_only: PID 1 is not systemd there, systemd-analyze may be absent, as on the
device test bed). A systemd-analyze that notes each call and refuses every unit stands in for "cannot verify here"."""
import os

from tests.helpers.ansible_run import run_playbook, task_results

PLAYBOOK = "tests/playbooks/sglang_unit_write.yml"


def write_unit(tmp_path, render_only):
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "systemd-analyze.calls"
    refuse = fake / "systemd-analyze"
    refuse.write_text("#!/bin/sh\necho \"$@\" >> %s\necho 'systemd-analyze: not on this host' >&2\nexit 127\n"
                      % calls)
    refuse.chmod(0o755)
    units = tmp_path / "units"
    units.mkdir()
    variables = {"sglang_layout_unit_dir": str(units), "sglang_server_render_only": render_only}
    rc, report = run_playbook(PLAYBOOK, variables, env={"PATH": "%s:%s" % (fake, os.environ["PATH"])})
    failed = [result for _name, result in task_results(report) if result.get("failed")]
    return rc, failed, units / "sglang.service", calls.read_text() if calls.exists() else ""


def test_a_unit_systemd_analyze_refuses_is_never_installed(tmp_path):
    rc, failed, unit, calls = write_unit(tmp_path, False)
    assert rc != 0 and not unit.exists()
    assert "not on this host" in failed[0]["stderr"] and calls.startswith("verify ")


def test_a_render_only_host_gets_the_unit_without_systemd_analyze(tmp_path):
    rc, failed, unit, calls = write_unit(tmp_path, True)
    assert rc == 0 and not failed, failed
    text = unit.read_text()
    assert "ExecStart=" in text and "--model-path /srv/models/model" in text
    assert calls == ""
