"""sglang_nccl_settings through real Ansible on a real venv holding the real sglang 0.5.21 wheel."""
import hashlib
import json
import os
import subprocess

import pytest

from tests.helpers import wheels
from tests.helpers.ansible_run import run_module

pytestmark = pytest.mark.wheels

PHB_FACTS = {"nvlink": False, "all_p2p_ok": True, "gpu_count": 2,
             "topology": {"gpus": ["GPU0", "GPU1"],
                          "matrix": {"GPU0": {"GPU0": "X", "GPU1": "PHB"}, "GPU1": {"GPU0": "PHB", "GPU1": "X"}}}}


@pytest.fixture(scope="module")
def venv(tmp_path_factory, pristine_venv_of):
    # The tests deliver settings into it: this module's own copy.
    return wheels.copy_venv(pristine_venv_of(("sglang", "0.5.21")), tmp_path_factory.mktemp("nccl") / "venv")


@pytest.fixture
def args(venv, tmp_path):
    return {"venv": venv, "env_file": str(tmp_path / "etc" / "nccl.env"), "gpu_facts": PHB_FACTS}


def seen_by_venv(venv, **env):
    """NCCL_* as the venv's Python sees them, started with an otherwise empty environment."""
    code = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('NCCL_')}))"
    proc = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin"] + ["%s=%s" % kv for kv in env.items()]
                          + [os.path.join(venv, "bin", "python"), "-c", code],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def digest(paths):
    return {p: hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None for p in paths}


def test_deliver_verify_rerun_and_remove(venv, args):
    applied = run_module("sglang_nccl_settings", dict(args, settings={"NCCL_DEBUG": {"value": "WARN",
                                                                                     "reason": "see init problems"}}))
    assert applied["changed"], applied
    assert applied["profile"] == "pcie"
    assert applied["settings"]["NCCL_P2P_LEVEL"]["value"] == "PHB"
    assert applied["sglang_overrides"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "always"  # read from 0.5.21's engine.py
    assert seen_by_venv(venv) == {"NCCL_DEBUG": "WARN", "NCCL_P2P_LEVEL": "PHB"}
    assert seen_by_venv(venv, NCCL_DEBUG="INFO")["NCCL_DEBUG"] == "INFO"  # an explicit environment wins
    assert seen_by_venv(venv, SGLANG_NCCL_ENV_DISABLE="1") == {}  # how the microbenchmark measures NCCL defaults
    env_text = open(args["env_file"]).read()
    assert "NCCL_P2P_LEVEL=PHB" in env_text and "# see init problems\nNCCL_DEBUG=WARN" in env_text
    assert "shared memory" in env_text  # the profile's reason travels with its value

    before = open(args["env_file"]).read()
    checked = run_module("sglang_nccl_settings", dict(args, settings={"NCCL_DEBUG": "INFO"}), check=True, diff=True)
    env_diff = [d for d in checked["diff"] if d["after_header"] == args["env_file"]]
    assert checked["changed"] and "NCCL_DEBUG=INFO" in env_diff[0]["after"]
    assert open(args["env_file"]).read() == before  # check mode wrote nothing
    again = run_module("sglang_nccl_settings", dict(args, settings={"NCCL_DEBUG": {"value": "WARN",
                                                                                   "reason": "see init problems"}}))
    assert not again["changed"]

    dry = run_module("sglang_nccl_settings", dict(args, state="absent"), check=True, diff=True)
    assert dry["changed"] and os.path.exists(args["env_file"])  # a dry removal removes nothing, and shows it:
    assert {d["before_header"] for d in dry["diff"]} == set(dry["removed"])
    assert all(d["after"] == "" for d in dry["diff"]) and "NCCL_DEBUG=WARN" in "".join(d["before"] for d in dry["diff"])
    removed = run_module("sglang_nccl_settings", dict(args, state="absent"))
    assert removed["changed"] and len(removed["removed"]) == 3
    assert seen_by_venv(venv) == {}
    assert not run_module("sglang_nccl_settings", dict(args, state="absent"))["changed"]


@pytest.mark.parametrize("settings,needle", [
    ({"NCCL_ALGO": "Tree"}, "NCCL_ALGO=allreduce:tree"),
    ({"NCCL_ALGOO": "Ring"}, "did you mean NCCL_ALGO?"),
    ({"NCCL_BUFFSIZE": "3000000"}, "power of two"),
    ({"NCCL_PROTO": "LL128"}, "corrupt"),
    ({"NCCL_ALGO": "allreduce:tree"}, "version is unknown"),  # no nvidia-nccl-* in this venv
])
def test_bad_settings_fail_before_any_file_changes(venv, args, settings, needle):
    assert run_module("sglang_nccl_settings", dict(args, settings={"NCCL_DEBUG": "WARN"}))["changed"]
    site = wheels.site_packages(venv)
    paths = [args["env_file"], os.path.join(site, "sglang_nccl_env.py"), os.path.join(site, "sglang_nccl_env.pth")]
    before = digest(paths)
    result = run_module("sglang_nccl_settings", dict(args, settings=settings))
    assert result.get("failed") and needle in result["msg"], result
    assert digest(paths) == before
    run_module("sglang_nccl_settings", dict(args, state="absent"))


def test_conditional_sglang_override_is_warned(venv, args):
    result = run_module("sglang_nccl_settings", dict(args, settings={"NCCL_CUMEM_ENABLE": "1"}))
    assert any("may be overwritten by SGLang" in w for w in result.get("warnings", [])), result
    run_module("sglang_nccl_settings", dict(args, state="absent"))
