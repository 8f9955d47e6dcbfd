"""fusion_patch publishes the flag that keeps fusion off (fusion_patch_server_no_fusion_args) in every state: where
fusion is not allowed on the host, where the patch is absent, and through its read-only entry point server_flags
(playbooks/benchmark.yml run by itself). A host that never fuses needs it most: SGLang turns fusion on by itself on
SM90/SM100 for the architectures it knows. Real ansible-playbook on localhost over a real sglang 0.5.23 venv, which
declares the switch: this module's own copy of the run's shared venv (one test patches it and rolls the patch back, and
other workers read the shared one meanwhile)."""
import hashlib
import os

import pytest
import yaml

from tests.helpers import wheels
from tests.helpers.ansible_run import failure, run_playbook, task_results

pytestmark = pytest.mark.wheels

OFF = ["--enforce-disable-flashinfer-allreduce-fusion"]


@pytest.fixture(scope="module")
def venv(pcie_ipc_venv, tmp_path_factory):
    return wheels.copy_venv(pcie_ipc_venv, tmp_path_factory.mktemp("no-fusion-args") / "venv")


def tree_digest(venv):
    digest = hashlib.sha256()
    site = wheels.site_packages(venv)
    for directory, _dirs, files in sorted(os.walk(os.path.join(site, "sglang", "srt", "layers"))):
        for name in sorted(files):
            with open(os.path.join(directory, name), "rb") as handle:
                digest.update(name.encode() + handle.read())
    return digest.hexdigest(), os.path.exists(os.path.join(venv, ".sglang-fusion-patch"))


def published(tmp_path, tasks_from, **variables):
    playbook = tmp_path / "fusion_patch.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "fusion_patch on localhost", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"name": "Run fusion_patch", "ansible.builtin.include_role": {
                       "name": "fusion_patch", "tasks_from": tasks_from}},
                  {"name": "Show what it published", "ansible.builtin.debug": {
                       "msg": "{{ {'on': fusion_patch_server_args | default('unset'),"
                              " 'off': fusion_patch_server_no_fusion_args} }}"}}],
    }], sort_keys=False))
    rc, report = run_playbook(str(playbook), variables)
    assert rc == 0, failure(report)
    results = task_results(report)
    changed = [name for name, result in results if result.get("changed")]
    return [result["msg"] for name, result in results if name == "Show what it published"][0], changed


@pytest.mark.parametrize("variables", [
    {"fusion_patch_allowed": False},  # gpu_preflight refused fusion on the host: the patch is rolled back
    {"fusion_patch_state": "absent"},
    {"fusion_patch_canary_failed": True},  # sglang_allreduce's fusion canary failed for this server: kept off
])
def test_main_publishes_the_off_switch_where_the_patch_is_not_applied(venv, tmp_path, variables):
    before = tree_digest(venv)
    flags, changed = published(tmp_path, "main", fusion_patch_venv=venv, **variables)
    assert flags == {"on": [], "off": OFF}
    assert changed == [] and tree_digest(venv) == before


def test_server_flags_reads_it_without_changing_anything(venv, tmp_path):
    before = tree_digest(venv)
    flags, changed = published(tmp_path, "server_flags", fusion_patch_venv=venv)
    assert flags == {"on": "unset", "off": OFF}  # the fusion flag stays main's, with its canary
    assert changed == [] and tree_digest(venv) == before


def test_server_flags_without_a_venv_publishes_nothing_to_pass(tmp_path):
    flags, _changed = published(tmp_path, "server_flags", fusion_patch_venv=str(tmp_path / "not-installed"))
    assert flags == {"on": "unset", "off": []}


def test_rollback_takes_the_patch_out_and_publishes_only_the_off_switch(venv, tmp_path):
    before = tree_digest(venv)
    flags, changed = published(tmp_path, "main", fusion_patch_venv=venv)
    assert flags == {"on": ["--flashinfer-allreduce-fusion-backend", "trtllm"], "off": OFF} and changed
    flags, changed = published(tmp_path, "rollback", fusion_patch_venv=venv,
                               fusion_patch_rollback_reason="the fusion canary failed")
    assert flags == {"on": [], "off": OFF} and changed
    assert tree_digest(venv) == before  # the original files back, no patch record left
