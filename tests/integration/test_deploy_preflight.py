"""playbooks/deploy.yml's one preflight through real ansible-playbook: a local host named into the play's group, its
GPUs read by the nvidia-smi stand-in (a 2-GPU capture profile). Every mistake is named in one message by the first
task that can fail, before any role runs and with nothing changed; only refused inputs run here (accepted ones would
deploy onto this machine: each inventory also holds a listen address the next check refuses)."""
import json
import os

import yaml

from tests.helpers.ansible_run import run_playbook, task_results
from tests.helpers.gpu_fixtures import PROFILES, STANDIN

TASK = "Check every role's inputs before any host changes"


def deploy(tmp_path, variables, profile="rtxpro6000-2x-pcie", extra=()):
    inventory = tmp_path / "hosts.yml"
    # A listen address sglang_server's settings check refuses (the task after the preflight): should the preflight
    # let the inputs pass, the run still stops before any role changes this machine.
    inventory.write_text(yaml.safe_dump({"blackwell": {"hosts": {"gpu-a": dict(
        dict(ansible_connection="local", ansible_python_interpreter="{{ ansible_playbook_python }}",
             gpu_preflight_nvidia_smi=STANDIN, sglang_server_model_path="/srv/models/m", sglang_server_host="0.0.0.0"),
        **variables)}}}))
    rc, report = run_playbook("deploy.yml", dict(extra), inventory=str(inventory),
                              env={"NVIDIA_SMI_STANDIN_PROFILE_DIR": os.path.join(PROFILES, profile)})
    ran = task_results(report, "gpu-a")
    return rc, ran


def refused(ran):
    failed = [(name, result) for name, result in ran if result.get("failed")]
    assert len(failed) == 1, failed
    assert not any(result.get("changed") for _name, result in ran)
    assert not any(" : " in name for name, _result in ran if name != TASK)
    return failed[0]


def test_every_mistake_is_named_in_one_message_before_any_role_runs(tmp_path):
    rc, ran = deploy(tmp_path, {
        "sglang_server_tp_szie": 2,
        "sglang_server_tp_size": 4,
        "nccl_tuning_settings": {"NCCL_P2P_LEVLE": "PHB"},
    })
    assert rc != 0
    name, result = refused(ran)
    assert name == TASK
    message = result["msg"]
    assert message.startswith("Preflight refused gpu-a before any change (3 problems): ")
    assert "sglang_server_tp_szie is not a variable any role reads" in message
    assert "did you mean sglang_server_tp_size?" in message
    assert "sglang_server_tp_size is 4 and this host has 2 GPU(s)" in message
    assert "NCCL_P2P_LEVLE is not an NCCL setting this role knows; did you mean NCCL_P2P_LEVEL?" in message
    # No cause that did not happen: no canary, no gpu_preflight advice.
    assert "canary" not in message and "run gpu_preflight" not in message


def test_a_negative_tp_size_is_refused_as_not_positive(tmp_path):
    rc, ran = deploy(tmp_path, {"sglang_server_tp_size": -2})
    assert rc != 0
    name, result = refused(ran)
    assert name == TASK
    assert result["problems"] == ["sglang_server_tp_size must be a positive integer (one tensor-parallel rank per "
                                  "GPU), got -2"]


def test_the_host_client_needs_its_packages_in_the_lock_this_run_installs(tmp_path):
    lock = tmp_path / "light.txt"
    lock.write_text("sglang==0.5.21\nflashinfer-python==0.6.18\n")
    rc, ran = deploy(tmp_path, {"sglang_install_lock": str(lock)})
    assert rc != 0
    _name, result = refused(ran)
    assert len(result["problems"]) == 1
    assert "sglang_install_lock (%s) pins none of numpy, aiohttp, requests, tqdm, transformers" % lock \
        in result["problems"][0]


def path_model(tmp_path, weight_bytes):
    """A path source whose manifest (on this host, the only place the preflight reads it) lists WEIGHT_BYTES of
    weights; the folder itself is never read before sglang_model verifies it."""
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"files": [
        {"name": "config.json", "size": 700, "sha256": "0" * 64},
        {"name": "model-00001-of-00001.safetensors", "size": weight_bytes, "sha256": "1" * 64}]}))
    return {"sglang_server_model_path": str(tmp_path / "m"), "sglang_model_dir": str(tmp_path / "models"),
            "sglang_model_models": [{"name": "m", "revision": "v1", "source": {
                "type": "path", "path": str(tmp_path / "m"), "manifest": str(manifest)}}]}


def test_a_model_larger_than_its_gpus_is_refused_with_the_figures(tmp_path):
    # 250 GiB over the capture's two 97887 MiB GPUs: 125 GiB a rank.
    rc, ran = deploy(tmp_path, dict(path_model(tmp_path, 250 * 1024 ** 3), sglang_server_tp_size=2))
    assert rc != 0
    name, result = refused(ran)
    assert name == TASK
    assert result["problems"] == [result["problems"][0]] and result["problems"][0].startswith(
        "m revision v1 cannot fit its GPUs: each tensor-parallel rank holds at least 1/2 of the weights")
    assert "the GPU's whole memory, 97887 MiB" in result["problems"][0]
    assert "spread it over 3 or more ranks" in result["problems"][0]
    assert not (tmp_path / "models").exists()


def test_a_model_that_fits_passes_the_preflight_with_what_it_compared(tmp_path):
    rc, ran = deploy(tmp_path, dict(path_model(tmp_path, 100 * 1024 ** 3), sglang_server_tp_size=2))
    assert rc != 0  # the listen address, refused by the next task
    preflight = dict(ran)[TASK]
    assert not preflight.get("failed")
    assert preflight["model_fit"].startswith("the weights fit: 100.0 GiB")
