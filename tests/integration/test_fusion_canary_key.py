"""What a fusion canary verdict stands for: fusion_patch keeps it per venv, canary shapes (the model's hidden size
from its config.json), GPUs, driver and canary script, and runs the canary again when any of them changes (a new
driver or other draft tokens are a server the verdict never saw).
The whole role runs on a real sglang 0.5.23 + flashinfer-python 0.7.2 venv (--no-deps), so the patch module really
patches and rolls back. There is no GPU here: the canary command is the test's own stand-in at that boundary; it
records how it was called and answers passed or failed as told by the file VERDICT."""
import getpass
import json

import pytest

from tests.helpers import canary_standin, wheels
from tests.helpers.ansible_run import failure, run_playbook, task_results

pytestmark = pytest.mark.wheels

PLAYBOOK = "tests/playbooks/role_local.yml"
GPUS = {"gpu_count": 2, "driver_version": "580.65.06",
        "gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"},
                 {"index": 1, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}]}


@pytest.fixture
def host(tmp_path):
    venv = wheels.make_venv(str(tmp_path / "venv"), wheels.wheel("sglang", "0.5.23"),
                            wheels.wheel("flashinfer-python", "0.7.2"))
    standin = canary_standin.make(tmp_path / "standin", "fusion")
    (tmp_path / "home").mkdir()  # sglang_install makes the service user's home
    model = tmp_path / "model"  # Kimi-K2.5 keeps its hidden size under text_config
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 7168}}))
    return {"venv": venv, "standin": standin, "tmp": tmp_path, "record": tmp_path / "home" / "fusion-canary.json",
            "model": model}


def deploy(host, gpus=GPUS, check=False, **variables):
    """The role with these variables; sglang_server_* go in as the playbooks pass them (fusion_patch_server_settings)."""
    server = {"model_path": str(host["model"])}
    for name in [name for name in variables if name.startswith("sglang_server_")]:
        server[name[len("sglang_server_"):]] = variables.pop(name)
    base = {"test_role": "fusion_patch", "fusion_patch_venv": host["venv"],
            "fusion_patch_canary_command": [str(host["standin"] / "canary")],
            "fusion_patch_canary_user": getpass.getuser(),
            "__fusion_patch_canary_bin": str(host["tmp"] / "installed-canary"),
            "fusion_patch_server_settings": server,
            "sglang_layout_root": str(host["tmp"] / "opt"), "sglang_layout_home": str(host["tmp"] / "home")}
    if gpus is not None:
        base["nvidia_gpu"] = gpus
    base.update(variables)
    rc, report = run_playbook(PLAYBOOK, base, check=check)
    return rc, report


def calls(host):
    """The arguments of every canary call so far."""
    return [call["args"] for call in canary_standin.calls(host["standin"])]


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
    rc, report = deploy(host, fusion_patch_canary_draft_tokens=4, fusion_patch_canary_max_batch=8)
    assert rc == 0, failure(report)
    args = calls(host)[-1]
    assert len(calls(host)) == 2 and args[args.index("--draft-tokens") + 1] == "4"
    assert args[args.index("--max-batch") + 1] == "8"
    assert json.loads(host["record"].read_text())["key"]["draft_tokens"] == 4

    # a new driver: the kernel never ran on it here, so it is proven again; it fails, fusion goes off
    (host["standin"] / "VERDICT").write_text("fail")
    new_driver = dict(GPUS, driver_version="590.10.01")
    rc, report = deploy(host, gpus=new_driver, fusion_patch_canary_draft_tokens=4, fusion_patch_canary_max_batch=8)
    assert rc == 0, failure(report)
    assert len(calls(host)) == 3 and not patched(host)
    record = json.loads(host["record"].read_text())
    assert not record["passed"] and record["key"]["gpu"]["driver"] == "590.10.01"

    # the failure is remembered for that key: nothing runs and the patch stays off ...
    (host["standin"] / "VERDICT").write_text("pass")
    rc, report = deploy(host, gpus=new_driver, fusion_patch_canary_draft_tokens=4, fusion_patch_canary_max_batch=8)
    assert rc == 0 and len(calls(host)) == 3 and not patched(host)
    # ... until the driver changes again (the fix an operator deploys): proven again, fusion back
    rc, report = deploy(host, gpus=dict(GPUS, driver_version="590.20.02"), fusion_patch_canary_draft_tokens=4,
                        fusion_patch_canary_max_batch=8)
    assert rc == 0, failure(report)
    assert len(calls(host)) == 4 and patched(host)


def test_without_the_gpu_facts_fusion_is_not_applied_unproven(host):
    rc, report = deploy(host, gpus=None)
    name, msg = failure(report)
    assert rc != 0 and name == "Require the GPU facts the canary runs on"
    assert "nvidia_gpu" in msg and "fusion_patch_canary: false" in msg
    assert calls(host) == [] and not patched(host)
    # rolling back needs no GPU facts
    rc, report = deploy(host, gpus=None, fusion_patch_state="absent")
    assert rc == 0, failure(report)


def reported(report, name):
    return [result for task, result in task_results(report) if task == name]


def test_a_dry_run_does_not_judge_a_new_key_by_the_old_verdict(host):
    (host["standin"] / "VERDICT").write_text("fail")
    assert deploy(host)[0] == 0 and not patched(host)  # failed on this driver: fusion off
    rc, report = deploy(host, gpus=dict(GPUS, driver_version="590.20.02"), check=True)
    assert rc == 0, failure(report)
    assert len(calls(host)) == 1 and not patched(host)  # nothing ran, nothing changed
    (canary,) = [r["ansible_facts"]["fusion_patch_canary_report"]
                 for r in reported(report, "Publish the canary's figures for the deploy report")]
    assert canary["summary"].startswith("fusion canary due")
    # a real deploy would patch and prove: the dry run says it would patch, and predicts no rollback
    (patch,) = reported(report, "Admit SM120 to FlashInfer allreduce fusion (present)")
    assert patch["changed"]
    assert all(r.get("skipped") for r in reported(report, "Restore the original files (fusion stays off on this host)"))


def test_the_canary_proves_the_servers_tp_size_and_shapes_from_the_settings_passed_in(host):
    # what an inventory sets for the server (8 GPUs here, served at TP 4), as deploy.yml, drift.yml and
    # fusion_patch.yml pass it (fusion_patch_server_settings): each proves (and compares) the same key
    rc, report = deploy(host, gpus=dict(GPUS, gpu_count=8), sglang_server_tp_size=4,
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
    rc, report = deploy(host, sglang_server_model_path="", fusion_patch_canary_hidden=2048)
    assert rc == 0, failure(report)
    assert hidden_of(calls(host)[-1]) == "2048"


def hidden_of(args):
    return args[args.index("--hidden") + 1]


@pytest.mark.parametrize("config, reason", [(None, "No such file"), ('{"hidden_size": "big"}', "no positive integer"),
                                            ("", "not set")])
def test_without_the_models_hidden_size_nothing_is_patched(host, config, reason):
    variables = {}
    if config is None:
        (host["model"] / "config.json").unlink()
    elif config:
        (host["model"] / "config.json").write_text(config)
    else:
        variables["sglang_server_model_path"] = ""
    rc, report = deploy(host, **variables)
    name, msg = failure(report)
    assert rc != 0 and name == "Require the model's hidden size"
    assert reason in msg and "fusion_patch_canary_hidden" in msg
    assert calls(host) == [] and not patched(host)
    # where no canary runs (rolled back, or proven elsewhere) the model is not needed
    assert deploy(host, fusion_patch_state="absent", **variables)[0] == 0
    assert deploy(host, fusion_patch_canary=False, **variables)[0] == 0 and patched(host)


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


def test_a_tp_group_larger_than_the_hosts_gpus_is_refused_before_the_patch(host):
    rc, report = deploy(host, sglang_server_tp_size=4)
    name, msg = failure(report)
    assert rc != 0 and "(4: fusion_patch_canary_gpus" in msg and "localhost has 2" in msg, (name, msg)
    assert "fusion_patch_state: absent" in msg
    assert not patched(host) and calls(host) == []
