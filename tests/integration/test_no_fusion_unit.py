"""A server that runs without fusion says so: sglang_server passes the release's off switch
(sglang_server_no_fusion_args, fusion_patch_server_no_fusion_args in the playbooks) wherever its command line carries
no fusion flag, once, and never beside a fusion flag. SGLang turns fusion on by itself on SM90/SM100 for the
architectures it knows (tp > 1, no fusion flag), so "no fusion" needs the flag.

Real ansible-playbook on localhost: sglang_server's preflight (every flag checked against a real sglang 0.5.23 venv,
which declares the switch) and its unit write (render-only, into a folder of the test), one unit per case; then the
fingerprint module over the units, as the restart decision reads them."""
import re

import pytest
import yaml

from tests.helpers.ansible_run import failure, run_module, run_playbook

pytestmark = pytest.mark.wheels

OFF = "--enforce-disable-flashinfer-allreduce-fusion"
FUSION = ["--flashinfer-allreduce-fusion-backend", "trtllm"]
PCIE = [OFF, "--disable-custom-all-reduce"]  # what sglang_allreduce gives its pcie_ipc path on 0.5.23

# service: (sglang_server_fusion, sglang_server_fusion_args, sglang_server_no_fusion_args)
CASES = {
    "fused": (True, FUSION, [OFF]),  # the fusion path: the switch would turn the proven fusion off
    "fused-deprecated": (True, ["--enable-flashinfer-allreduce-fusion"], [OFF]),
    "no-flag": (True, [], [OFF]),  # the patch absent, fusion refused or its canary failed
    "fusion-false": (False, FUSION, [OFF]),  # the benchmark gate's baseline leg
    "nccl-path": (True, [OFF], [OFF]),  # sglang_allreduce's nccl path carries it already: once
    "pcie-path": (True, PCIE, [OFF]),
    "old-release": (True, [], []),  # before 0.5.14 there is no switch to pass
}


@pytest.fixture(scope="module")
def units(pcie_ipc_venv, tmp_path_factory):
    folder = tmp_path_factory.mktemp("no-fusion-units")
    case_file = folder / "case.yml"
    case_file.write_text(yaml.safe_dump([
        {"name": "Check and assemble the arguments", "ansible.builtin.include_role": {
            "name": "sglang_server", "tasks_from": "preflight"}},
        {"name": "Write the unit", "ansible.builtin.include_role": {"name": "sglang_server", "tasks_from": "unit"}},
    ], sort_keys=False))
    playbook = folder / "render.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "One unit per case", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"name": "Render the case", "ansible.builtin.include_tasks": str(case_file),
                   "vars": {"sglang_server_service": "{{ case.key }}",
                            "sglang_server_fusion": "{{ case.value[0] }}",
                            "sglang_server_fusion_args": "{{ case.value[1] }}",
                            "sglang_server_no_fusion_args": "{{ case.value[2] }}"},
                   "loop": "{{ cases | dict2items }}", "loop_control": {"loop_var": "case", "label": "{{ case.key }}"}}],
    }], sort_keys=False))
    unit_dir = folder / "units"
    unit_dir.mkdir()
    rc, report = run_playbook(str(playbook), {
        "cases": {name: list(case) for name, case in CASES.items()}, "sglang_server_venv": pcie_ipc_venv,
        "sglang_server_model_path": "/srv/models/m", "sglang_server_tp_size": 2, "sglang_server_render_only": True,
        "sglang_layout_unit_dir": str(unit_dir), "sglang_server_home": str(folder / "home")})
    assert rc == 0, failure(report)
    return unit_dir


def exec_args(unit_dir, name):
    text = (unit_dir / ("%s.service" % name)).read_text()
    execstart = [line for line in text.splitlines() if line.startswith("ExecStart=")][0]
    description = [line for line in text.splitlines() if line.startswith("Description=")][0]
    return execstart.split()[3:], description


@pytest.mark.parametrize("name,off,fused", [
    ("fused", 0, True), ("fused-deprecated", 0, True), ("no-flag", 1, False), ("fusion-false", 1, False),
    ("nccl-path", 1, False), ("pcie-path", 1, False), ("old-release", 0, False),
])
def test_the_unit_passes_the_off_switch_exactly_when_it_runs_without_fusion(units, name, off, fused):
    argv, description = exec_args(units, name)
    assert argv.count(OFF) == off, argv
    assert any(flag in argv for flag in ("--flashinfer-allreduce-fusion-backend",
                                         "--enable-flashinfer-allreduce-fusion")) == fused, argv
    assert ("allreduce fusion" in description) == fused, description
    if name == "pcie-path":
        assert argv[-2:] == PCIE  # the path's own flags, in its order, nothing added
    if name == "fusion-false":
        assert argv[-1] == OFF


def test_the_restart_decision_sees_the_switch(units):
    """The fingerprint reads the unit: a unit that gains the switch (a deploy of this role over an older one, or a
    release that declares it) is a change, and its server restarts; the same unit again is not."""
    def fingerprint(name):
        return run_module("sglang_server_fingerprint", {"paths": [str(units / ("%s.service" % name))]})["fingerprint"]
    with_off = (units / "no-flag.service").read_text()
    without = re.sub(r" %s(?=\s|$)" % re.escape(OFF), "", with_off)
    assert without != with_off and with_off.count(OFF) == 1
    (units / "as-before.service").write_text(without)
    (units / "again.service").write_text(with_off)
    assert fingerprint("no-flag") != fingerprint("as-before")
    assert fingerprint("no-flag") == fingerprint("again")
