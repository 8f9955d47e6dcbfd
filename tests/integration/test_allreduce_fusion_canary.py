"""What a fusion canary verdict stands for: sglang_allreduce keeps it per venv, canary shapes (the model's hidden size
from its config.json), GPUs, driver and canary script, and runs the canary again when any of them changes (a new
driver or other draft tokens are a server the verdict never saw); a failed one rolls fusion_patch's patch back and
keeps it off, wired as deploy.yml wires it (tests/playbooks/fusion_canary_local.yml).
The roles run on a real sglang 0.5.23 + flashinfer-python 0.7.2 venv (--no-deps), so the patch module really
patches and rolls back. There is no GPU here: the canary command is the test's own stand-in at that boundary; it
records how it was called and answers passed or failed as told by the file VERDICT."""
import getpass
import json

import pytest

from tests.helpers import canary_standin, wheels
from tests.helpers.ansible_run import failure, run_playbook, task_results

pytestmark = pytest.mark.wheels

PLAYBOOK = "tests/playbooks/fusion_canary_local.yml"
NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPUS = {"gpu_count": 2, "driver_version": "580.65.06", "gpus": [{"index": 0, "name": NAME}, {"index": 1, "name": NAME}]}
EIGHT = dict(GPUS, gpu_count=8, gpus=[{"index": i, "name": NAME} for i in range(8)])


@pytest.fixture
def host(tmp_path, pristine_venv_of):
    # Each test patches its venv: a copy of one made once.
    venv = wheels.copy_venv(pristine_venv_of(("sglang", "0.5.23"), ("flashinfer-python", "0.7.2")), tmp_path / "venv")
    standin = canary_standin.make(tmp_path / "standin", "fusion")
    (tmp_path / "home").mkdir()  # sglang_install makes the service user's home
    model = tmp_path / "model"  # Kimi-K2.5 keeps its hidden size under text_config
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 7168}}))
    return {"venv": venv, "standin": standin, "tmp": tmp_path, "record": tmp_path / "home" / "fusion-canary.json",
            "model": model}


def deploy(host, gpus=GPUS, check=False, **variables):
    base = {"fusion_patch_venv": host["venv"], "sglang_allreduce_venv": host["venv"],
            "sglang_allreduce_canary_command": [str(host["standin"] / "canary")],
            "sglang_allreduce_user": getpass.getuser(),
            "sglang_allreduce_tools_dir": str(host["tmp"] / "tools"),
            "sglang_server_model_path": str(host["model"]),
            "sglang_layout_root": str(host["tmp"] / "opt"), "sglang_layout_home": str(host["tmp"] / "home"),
            "sglang_layout_state_dir": str(host["tmp"] / "home")}
    if gpus is not None:
        base["nvidia_gpu"] = gpus
    base.update(variables)
    rc, report = run_playbook(PLAYBOOK, base, check=check)
    return rc, report


def calls(host):
    """The arguments of every fusion canary call so far (the venv's PCIe IPC canary runs beside it)."""
    return [call["args"] for call in canary_standin.calls(host["standin"], "fusion")]


def patched(host):
    return (host["tmp"] / "venv" / ".sglang-fusion-patch" / "state.json").exists()


def test_the_verdict_is_kept_per_shapes_gpus_and_driver(host):
    rc, report = deploy(host)
    assert rc == 0, failure(report)
    (args,) = calls(host)
    assert args[args.index("--tokens") + 1] == "1,2,4,8,16,32,64,128" and "--draft-tokens" not in args
    record = json.loads(host["record"].read_text())
    assert record["passed"] and args[args.index("--hidden") + 1] == "7168"
    assert record["key"] == {"venv": host["venv"], "world_size": 2, "hidden": 7168, "tokens": "1,2,4,8,16,32,64,128",
                             "draft_tokens": None, "max_batch": None,
                             "gpu": {"driver": "580.65.06", "gpus": [GPUS["gpus"][0]["name"]] * 2},
                             "canary": canary_standin.version()}
    assert patched(host)

    assert deploy(host)[0] == 0 and len(calls(host)) == 1  # same key: the verdict stands, nothing runs

    # the server's speculative shapes are new to the canary: proven again, at those shapes
    rc, report = deploy(host, sglang_allreduce_speculative_num_draft_tokens=4, sglang_allreduce_cuda_graph_max_bs=8)
    assert rc == 0, failure(report)
    args = calls(host)[-1]
    assert len(calls(host)) == 2 and args[args.index("--draft-tokens") + 1] == "4"
    assert args[args.index("--max-batch") + 1] == "8"
    assert json.loads(host["record"].read_text())["key"]["draft_tokens"] == 4

    # a new driver: the kernel never ran on it here, so it is proven again; it fails, fusion goes off
    (host["standin"] / "VERDICT").write_text("fail")
    new_driver = dict(GPUS, driver_version="590.10.01")
    rc, report = deploy(host, gpus=new_driver, sglang_allreduce_speculative_num_draft_tokens=4,
                        sglang_allreduce_cuda_graph_max_bs=8)
    assert rc == 0, failure(report)
    assert len(calls(host)) == 3 and not patched(host)
    record = json.loads(host["record"].read_text())
    assert not record["passed"] and record["key"]["gpu"]["driver"] == "590.10.01"

    # the failure is remembered for that key: nothing runs and the patch stays off ...
    (host["standin"] / "VERDICT").write_text("pass")
    rc, report = deploy(host, gpus=new_driver, sglang_allreduce_speculative_num_draft_tokens=4,
                        sglang_allreduce_cuda_graph_max_bs=8)
    assert rc == 0 and len(calls(host)) == 3 and not patched(host)
    # ... until the driver changes again (the fix an operator deploys): proven again, fusion back
    rc, report = deploy(host, gpus=dict(GPUS, driver_version="590.20.02"), sglang_allreduce_speculative_num_draft_tokens=4,
                        sglang_allreduce_cuda_graph_max_bs=8)
    assert rc == 0, failure(report)
    assert len(calls(host)) == 4 and patched(host)


def test_without_the_gpu_facts_fusion_is_not_applied_unproven(host):
    rc, report = deploy(host, gpus=None)
    name, msg = failure(report)
    assert rc != 0 and name == "Require the GPU facts the canaries run on"
    assert "nvidia_gpu" in msg and "sglang_allreduce_canary: false" in msg
    assert calls(host) == [] and not patched(host)
    # rolling back needs no GPU facts where the kernels are not held to their canaries
    rc, report = deploy(host, gpus=None, fusion_patch_state="absent", sglang_allreduce_canary=False)
    assert rc == 0, failure(report)


def reported(report, name):
    return [result for task, result in task_results(report) if task == name]


def test_a_dry_run_does_not_judge_a_new_key_by_the_old_verdict(host):
    (host["standin"] / "VERDICT").write_text("fail")
    assert deploy(host)[0] == 0 and not patched(host)  # failed on this driver: fusion off
    rc, report = deploy(host, gpus=dict(GPUS, driver_version="590.20.02"), check=True)
    assert rc == 0, failure(report)
    assert len(calls(host)) == 1 and not patched(host)  # nothing ran, nothing changed
    canary = [r["ansible_facts"]["sglang_allreduce_canaries"]["fusion"]
              for r in reported(report, "Publish the canaries' verdicts")][-1]
    assert canary["state"] == "due" and "another venv, shapes, sizing, GPUs, driver" in canary["why"]
    # a real deploy would patch and prove: the dry run says it would patch, and predicts no rollback
    (patch,) = reported(report, "Admit SM120 to FlashInfer allreduce fusion (present)")
    assert patch["changed"]
    assert all(r.get("skipped") for r in reported(report, "Roll the fusion patch back where its canary failed"))


def test_the_canary_proves_the_servers_tp_size_and_shapes_from_the_settings_passed_in(host):
    # what an inventory sets for the server (8 GPUs here, served at TP 4), as deploy.yml, drift.yml and
    # fusion_patch.yml pass it (sglang_allreduce_server_settings): each proves (and compares) the same key
    rc, report = deploy(host, gpus=EIGHT, sglang_server_tp_size=4,
                        sglang_server_speculative_num_draft_tokens=4, sglang_server_cuda_graph_max_bs=16)
    assert rc == 0, failure(report)
    (args,) = calls(host)
    assert args[args.index("--draft-tokens") + 1] == "4" and args[args.index("--max-batch") + 1] == "16"
    key = json.loads(host["record"].read_text())["key"]
    assert (key["world_size"], key["draft_tokens"], key["max_batch"]) == (4, 4, 16)


def test_the_canary_proves_the_models_own_hidden_size(host):
    (host["model"] / "config.json").write_text(json.dumps({"hidden_size": 4096}))
    rc, report = deploy(host)
    assert rc == 0, failure(report)
    (args,) = calls(host)
    assert args[args.index("--hidden") + 1] == "4096"
    assert json.loads(host["record"].read_text())["key"]["hidden"] == 4096
    # another model on the same venv and GPUs is a shape the verdict never saw
    (host["model"] / "config.json").write_text(json.dumps({"hidden_size": 5120}))
    assert deploy(host)[0] == 0 and len(calls(host)) == 2 and hidden_of(calls(host)[-1]) == "5120"
    # given explicitly (a model not on the host yet), the setting wins and no model is read
    rc, report = deploy(host, sglang_server_model_path="", sglang_allreduce_hidden_size=2048)
    assert rc == 0, failure(report)
    assert hidden_of(calls(host)[-1]) == "2048"


def hidden_of(args):
    return args[args.index("--hidden") + 1]


def fusion_refusal(report):
    return [r["ansible_facts"]["sglang_allreduce_result"]["refused"].get("fusion", [])
            for r in reported(report, "Publish every path's verdict and the candidates (the benchmark gate measures them)")][-1]


@pytest.mark.parametrize("config", [None, ""])
def test_without_the_models_hidden_size_fusion_stays_off_and_unpatched(host, config):
    variables = {}
    if config is None:
        (host["model"] / "config.json").unlink()
    else:
        variables["sglang_server_model_path"] = ""
    rc, report = deploy(host, **variables)
    assert rc == 0, failure(report)
    assert "needs the model's hidden size" in " ".join(fusion_refusal(report))
    assert calls(host) == [] and not patched(host)
    # a re-run changes nothing (the patch is kept off before it goes in) ...
    rc, report = deploy(host, **variables)
    assert rc == 0 and not patched(host)
    assert not [r for r in reported(report, "Admit SM120 to FlashInfer allreduce fusion (absent)") if r.get("changed")]
    # ... and where no canary runs (proven elsewhere) the model is not needed
    assert deploy(host, sglang_allreduce_canary=False, **variables)[0] == 0 and patched(host)


def test_a_model_config_without_a_usable_hidden_size_fails_before_the_patch(host):
    (host["model"] / "config.json").write_text('{"hidden_size": "big"}')
    rc, report = deploy(host)
    name, msg = failure(report)
    assert rc != 0 and "no positive integer" in msg, (name, msg)
    assert calls(host) == [] and not patched(host)


def test_a_verdict_from_another_canary_script_is_proven_again(host):
    assert deploy(host)[0] == 0 and len(calls(host)) == 1
    record = json.loads(host["record"].read_text())
    # what an older collection recorded: its script checked less, so its verdict does not stand
    record["key"]["canary"] = "0123456789abcdef"
    record["passed"] = False
    host["record"].write_text(json.dumps(record))
    rc, report = deploy(host)
    assert rc == 0, failure(report)
    assert len(calls(host)) == 2 and patched(host)
    assert json.loads(host["record"].read_text())["key"]["canary"] == canary_standin.version()


def test_a_tp_group_larger_than_the_hosts_gpus_keeps_fusion_off_and_unpatched(host):
    rc, report = deploy(host, sglang_server_tp_size=4)
    assert rc == 0, failure(report)
    refusal = " ".join(fusion_refusal(report))
    assert "tensor-parallel group (4) on this host, which has 2" in refusal and "spread over hosts" in refusal, refusal
    assert not patched(host) and calls(host) == []
