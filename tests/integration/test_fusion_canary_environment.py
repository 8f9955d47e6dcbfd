"""The fusion canary runs in the server's runtime environment (sglang_install's facts entry point, wired by
deploy.yml): FlashInfer's first JIT build runs `ninja` from PATH, and the venv's ninja is on the server's PATH
(runtime.env), not on the PATH an SSH session gives the canary's runuser. Without it the real canary cannot build
its kernel and fusion stays off on every host. The canary command here is the test's own: it records the
environment it was started with as its result."""
import json
import os

from tests.helpers.ansible_run import failure, run_playbook

PLAYBOOK = "tests/playbooks/fusion_canary_environment.yml"
RECORDER = """#!/usr/bin/env python3
import json, os, sys
out = sys.argv[sys.argv.index("--out") + 1]
keys = ("PATH", "HOME", "FLASHINFER_WORKSPACE_BASE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "NCCL_NVLS_ENABLE")
with open(out, "w") as handle:
    json.dump({"passed": True, "summary": "environment recorded", "env": {k: os.environ.get(k) for k in keys}}, handle)
"""


def run_canary(tmp_path, wire, **variables):
    recorder = tmp_path / "canary"
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    result = tmp_path / "canary.json"
    extra = {"wire_runtime_environment": wire, "sglang_allreduce_canary_command": [str(recorder)],
             "sglang_allreduce_user": "root", "canary_result": str(result),
             "sglang_allreduce_tools_dir": str(tmp_path / "tools"),
             "sglang_layout_root": str(tmp_path / "opt"), "sglang_layout_home": str(tmp_path / "home"),
             "sglang_layout_state_dir": str(tmp_path / "home")}
    extra.update(variables)
    rc, report = run_playbook(PLAYBOOK, extra, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})  # an SSH session's
    assert rc == 0, failure(report)
    return json.loads(result.read_text())["env"]


def test_the_canary_runs_with_the_servers_path_workspace_and_variables(tmp_path):
    # A venv built on a base interpreter (as on the device test bed): the base's bin follows the venv's.
    env = run_canary(tmp_path, True, sglang_install_environment={"NCCL_NVLS_ENABLE": "0"},
                     sglang_install_base_site_packages=True, sglang_install_python="/opt/torch/.venv/bin/python3")
    venv_bin = os.path.join(str(tmp_path / "opt"), "current", "bin")
    assert env["PATH"].split(":")[:2] == [venv_bin, "/opt/torch/.venv/bin"]  # where the venv's ninja is
    # (HOME is the canary user's own: runuser sets it; the service user's home is sglang_layout_home.)
    assert env["FLASHINFER_WORKSPACE_BASE"] == str(tmp_path / "home" / "flashinfer")
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1" and env["NCCL_NVLS_ENABLE"] == "0"


def test_unwired_the_canary_gets_the_callers_path_as_before(tmp_path):
    env = run_canary(tmp_path, False)
    assert env["PATH"] == "/usr/sbin:/usr/bin:/sbin:/bin" and env["TRANSFORMERS_OFFLINE"] is None
