"""The drift check's restart prediction is the restart the deploy then makes (issue 39), for each tamper the drift
tests plant, without the lab: sglang_server's own decision (tasks/decide.yml, the fingerprint module) runs on this
machine in check mode with what the earlier roles' modules report in check mode (the prediction a drift check
reports), then, after those modules wrote their files for real (the repair), in a real run (the deploy's decision).

A deployed host is simulated under tmp_path: the unit, `current` -> a venv of the real sglang wheel (the NCCL module
needs one), its fusion patch record, runtime.env, nccl.env (written by sglang_nccl_settings), a record of the last
proven start (written as restart.yml writes it), and a `systemctl` stand-in on PATH answering `show`.
"""
import grp
import json
import os
import pwd

import pytest

from tests.helpers import wheels
from tests.helpers.ansible_run import REPO, failure, run_module, run_playbook, task_results

PLAYBOOK = "tests/playbooks/role_tasks_local.yml"
RUNTIME_ENV = "HF_HUB_OFFLINE=1\nHOME=/var/lib/sglang\n"
PHB_FACTS = {"count": 2, "topology": {"nvlink": False, "pcie_path": "PHB"}}


@pytest.fixture(scope="module")
def wheel_venv(pristine_venv_of):
    return pristine_venv_of(("sglang", "0.5.21"))  # only copied


@pytest.fixture
def host(tmp_path, wheel_venv):
    """The deployed host's layout and how to run the decision on it."""
    root, env_dir, home, units, fake = (tmp_path / name for name in ("opt", "etc", "home", "units", "bin"))
    for folder in (root / "venvs", env_dir, home, units, fake):
        folder.mkdir(parents=True)
    venv_a = root / "venvs" / "a"
    wheels.copy_venv(wheel_venv, venv_a)
    (venv_a / ".sglang-fusion-patch").mkdir()
    (venv_a / ".sglang-fusion-patch" / "state.json").write_text('{"files": {}, "version": 1}\n')
    wheels.copy_venv(str(venv_a), root / "venvs" / "b")
    os.symlink(str(venv_a), str(root / "current"))
    (units / "sglang.service").write_text("[Service]\nExecStart=/bin/true\nTimeoutStopSec=120\n")
    (fake / "systemctl").write_text('#!/bin/sh\ncat "%s" 2>/dev/null || echo active\n' % (tmp_path / "state"))
    os.chmod(str(fake / "systemctl"), 0o755)
    env = {"PATH": "%s:%s" % (fake, os.environ["PATH"])}
    layout = {"sglang_layout_root": str(root), "sglang_layout_env_dir": str(env_dir),
              "sglang_layout_home": str(home), "sglang_layout_state_dir": str(home),
              "sglang_layout_unit_dir": str(units),
              "nvidia_gpu": {"driver_version": "580.105.08"}}

    class Host:
        current = str(root / "current")
        runtime_env = str(env_dir / "runtime.env")
        nccl_env = str(env_dir / "nccl.env")
        unit = str(units / "sglang.service")
        record = str(home / ".deployed-config")
        state = tmp_path / "state"
        venvs = root / "venvs"

        def writers(self, check, nccl_settings=None):
            """What sglang_install (runtime.env), nccl_tuning (nccl.env) and the venv switch publish, as their
            modules report it in this mode; in a real run they write."""
            runtime = run_module("sglang_env_file", {"dest": self.runtime_env, "content": RUNTIME_ENV,
                                                     "owner": pwd.getpwuid(os.getuid()).pw_name,
                                                     "group": grp.getgrgid(os.getgid()).gr_name},
                                 check=check)
            nccl = run_module("sglang_nccl_settings", {"venv": self.current, "env_file": self.nccl_env,
                                                       "gpu_facts": PHB_FACTS, "settings": nccl_settings or {}},
                              check=check)
            assert not runtime.get("failed") and not nccl.get("failed"), (runtime, nccl)
            facts = {"sglang_server_pending_nccl": nccl,
                     "sglang_server_pending_install": {self.runtime_env: "sha1:" + runtime["checksum"]}
                     if runtime["content_changed"] else {}}
            return facts

        def decide(self, check, facts=None, extra=None):
            """sglang_server's decision (tasks/decide.yml): (restart needed, why)."""
            variables = dict(layout, test_role="sglang_server", test_tasks="decide", **(facts or {}))
            variables.update(extra or {})
            rc, report = run_playbook(PLAYBOOK, variables, env=env, check=check)
            assert rc == 0, failure(report)
            noted = [result for name, result in task_results(report) if name == "Note the restart decision"][0]
            read = [result for name, result in task_results(report) if name == "Fingerprint what the server runs"][0]
            return noted["ansible_facts"]["sglang_server_restart_needed"], \
                noted["ansible_facts"]["sglang_server_restart_why"], read

        def prove(self):
            """A proven start: the files as deployed, the record as restart.yml writes it."""
            self.writers(check=False)
            _needed, _why, read = self.decide(check=False)
            with open(self.record, "w") as handle:
                handle.write(read["record"])
            assert self.decide(check=False)[0] is False

    return Host()


def predict_then_deploy(host, **kwargs):
    """(predicted, why predicted, deployed, why deployed): the drift check's prediction, then the deploy's decision
    after the earlier roles repaired their files."""
    predicted, why_predicted, _ = host.decide(True, host.writers(check=True, **kwargs))
    deployed, why_deployed, _ = host.decide(False, host.writers(check=False, **kwargs))
    return predicted, why_predicted, deployed, why_deployed


def test_an_nccl_env_file_tamper_is_repaired_without_a_restart_and_predicted_so(host):
    """The issue's case: the server read nccl.env when it started; the repair puts back what it read."""
    host.prove()
    with open(host.nccl_env, "a") as handle:
        handle.write("NCCL_ALGO=Ring\n")
    assert predict_then_deploy(host) == (False, [], False, [])


def test_a_runtime_env_tamper_is_repaired_without_a_restart_and_predicted_so(host):
    host.prove()
    with open(host.runtime_env, "a") as handle:
        handle.write("HF_HUB_OFFLINE=0\n")
    assert predict_then_deploy(host) == (False, [], False, [])


def test_new_nccl_settings_restart_and_are_predicted_and_named(host):
    host.prove()
    predicted, why_predicted, deployed, why_deployed = predict_then_deploy(
        host, nccl_settings={"NCCL_ALGO": {"value": "Ring", "reason": "measured"}})
    assert (predicted, deployed) == (True, True)
    assert why_predicted == why_deployed == ["changed: nccl env"]


def test_a_driver_upgrade_restarts_and_is_predicted(host):
    host.prove()
    upgraded = {"nvidia_gpu": {"driver_version": "580.126.09"}}
    predicted, why_predicted, _ = host.decide(True, host.writers(check=True), upgraded)
    deployed, why_deployed, _ = host.decide(False, host.writers(check=False), upgraded)
    assert (predicted, deployed) == (True, True) and why_predicted == why_deployed == ["changed: GPU driver"]


def test_a_stopped_server_restarts_and_is_predicted(host):
    host.prove()
    host.state.write_text("inactive\n")
    predicted, why_predicted, deployed, why_deployed = predict_then_deploy(host)
    assert (predicted, deployed) == (True, True) and why_predicted == why_deployed == ["not active (inactive)"]


def test_a_switched_venv_restarts_and_is_predicted(host):
    """`current` switched to another venv: the deploy points it back (sglang_install publishes where, in check
    mode), so nothing restarts; a deploy that switches it on purpose restarts, and says so."""
    host.prove()
    good = os.readlink(host.current)
    os.unlink(host.current)
    os.symlink(str(host.venvs / "b"), host.current)
    back = {host.current: "link:" + good, host.current + "/.sglang-fusion-patch/state.json":
            "like:" + good + "/.sglang-fusion-patch/state.json"}
    predicted, why, _ = host.decide(True, {"sglang_server_pending_install": back})
    os.unlink(host.current)
    os.symlink(good, host.current)
    assert (predicted, why) == (False, []) and host.decide(False)[:2] == (False, [])
    other = str(host.venvs / "b")
    to_b = {host.current: "link:" + other, host.current + "/.sglang-fusion-patch/state.json":
            "like:" + other + "/.sglang-fusion-patch/state.json"}
    predicted, why, _ = host.decide(True, {"sglang_server_pending_install": to_b})
    os.unlink(host.current)
    os.symlink(other, host.current)
    assert (predicted, why) == (True, ["changed: venv target"]) == host.decide(False)[:2]


def test_a_reinstalled_wheel_restarts_and_is_predicted(host):
    """fusion_patch re-patches: its record gets a new time stamp, which the dry run cannot know, so both restart."""
    host.prove()
    predicted, why, _ = host.decide(True, {"sglang_server_pending_fusion_patch": True})
    state = os.path.join(host.current, ".sglang-fusion-patch", "state.json")
    with open(state, "w") as handle:  # as the patch module writes it again
        json.dump({"files": {"x.py": {"patched_at": "now"}}, "version": 1}, handle)
    assert (predicted, why) == (True, ["changed: patch record"]) == host.decide(False)[:2]


def test_an_old_record_says_it_does_not_know_which_input(host):
    host.prove()
    with open(host.record) as handle:
        first_line = handle.readline()
    with open(host.record, "w") as handle:
        handle.write(first_line)  # as versions before the per-input digests recorded it
    assert host.decide(False)[:2] == (False, [])
    predicted, why, _ = host.decide(True, host.writers(check=True, nccl_settings={"NCCL_ALGO": "Ring"}))
    assert predicted and why == ["its fingerprint changed (unknown which input: the record predates per-input "
                                 "digests)"]
