"""The gpu_probes role on localhost: the all-reduce microbenchmark runs at the server's world size and the model's
hidden size, once with the deployed NCCL settings and once with NCCL's defaults, and its results reach the
controller. There is no GPU here: the venv's python is the test's stand-in at that boundary; it records how the role
called it and answers with a result the real microbenchmark wrote on 2x H200 (h200x2_fusion_probes.json)."""
import getpass
import json
import os
import pathlib
import sys
import tempfile

import pytest

from tests.helpers.ansible_run import REPO, failure, run_playbook, task_results

PLAYBOOK = "tests/playbooks/role_local.yml"
CAPTURE = os.path.join(REPO, "tests", "fixtures", "device", "h200x2_fusion_probes.json")

STANDIN = """#!%(python)s
# Stand-in for the venv's python running the all-reduce microbenchmark under torch.distributed.run (no GPU here):
# records its call, answers with a real result of that benchmark relabelled as asked.
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as handle:
    handle.write(json.dumps({"args": args, "nccl_env_disable": os.environ.get("SGLANG_NCCL_ENV_DISABLE")}) + "\\n")
result = json.load(open(%(capture)r))["results"]["bench_defaults"]
result["label"] = args[args.index("--label") + 1]
with open(args[args.index("--out") + 1], "w") as handle:
    json.dump(result, handle)
"""


@pytest.fixture
def host(tmp_path):
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text(STANDIN % {"python": sys.executable, "capture": CAPTURE})
    (venv_bin / "python").chmod(0o755)
    model = tmp_path / "model"  # Kimi-K2.5 keeps its hidden size under text_config
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 4096}}))
    return tmp_path


def probe(host, check=False, **variables):
    """The role with these variables; sglang_server_* and sglang_allreduce_hidden_size go in as
    playbooks/allreduce_bench.yml passes them (gpu_probes_server_settings, gpu_probes_allreduce_hidden_size)."""
    server = {"model_path": str(host / "model")}
    for name in [name for name in variables if name.startswith("sglang_server_")]:
        server[name[len("sglang_server_"):]] = variables.pop(name)
    if "sglang_allreduce_hidden_size" in variables:
        variables["gpu_probes_allreduce_hidden_size"] = variables.pop("sglang_allreduce_hidden_size")
    base = {"test_role": "gpu_probes", "gpu_probes_venv": str(host / "venv"), "gpu_probes_user": getpass.getuser(),
            "gpu_probes_report_dir": str(host / "reports"), "sglang_allreduce_tools_dir": str(host / "tools"),
            "gpu_probes_server_settings": server,
            "nvidia_gpu": {"gpu_count": 8, "driver_version": "580.65.06", "gpus": []}}
    base.update(variables)
    return run_playbook(PLAYBOOK, base, check=check)


def calls(host):
    path = host / "venv" / "bin" / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def option(call, name):
    return call["args"][call["args"].index(name) + 1]


def test_it_measures_the_models_shapes_at_the_servers_world_size_with_and_without_the_deployed_settings(host):
    rc, report = probe(host, sglang_server_tp_size=4)
    assert rc == 0, failure(report)
    made = calls(host)
    assert [(option(c, "--label"), c["nccl_env_disable"]) for c in made] == [("deployed", "0"), ("defaults", "1")]
    assert {option(c, "--nproc-per-node") for c in made} == {"4"}      # the server's TP, not all 8 GPUs
    assert {option(c, "--hidden") for c in made} == {"4096"}           # the model's own hidden size
    assert all(c["args"][:3] == ["-m", "torch.distributed.run", "--standalone"] for c in made)
    # installed by sglang_allreduce's tools entry point, beside the CUDA-graph timer it imports
    for script in ("allreduce_bench.py", "cuda_graph_timer.py"):
        assert (host / "tools" / script).read_bytes() == open(os.path.join(REPO, "roles/sglang_allreduce/files",
                                                                           script), "rb").read()
    assert {c["args"][5] for c in made} == {str(host / "tools" / "allreduce_bench.py")}
    for label in ("deployed", "defaults"):
        fetched = json.loads((host / "reports" / "localhost" / ("allreduce-%s.json" % label)).read_text())
        assert fetched["label"] == label and fetched["tool"] == "allreduce_bench"
    shown = dict(task_results(report))["Show the comparison"]["msg"]
    assert "2 GPUs" in shown and "1: 13.02 / 13.02" in shown
    outs = {os.path.dirname(option(c, "--out")) for c in made}  # one private folder on the host, removed after
    assert len(outs) == 1 and not os.path.exists(outs.pop())


def test_a_dry_run_says_what_it_would_measure_and_neither_installs_nor_runs_anything(host):
    rc, report = probe(host, check=True, sglang_server_tp_size=4)
    assert rc == 0, failure(report)
    said = dict(task_results(report))["Say what the probe would measure (check mode)"]["msg"]
    assert "on 4 GPUs at [1,2,4,8,16,32,64,128] x 4096 bf16" in said
    assert calls(host) == [] and not (host / "tools").exists() and not (host / "reports").exists()


def test_without_a_tp_size_every_gpu_of_the_host_takes_part(host):
    rc, report = probe(host)
    assert rc == 0, failure(report)
    assert {option(c, "--nproc-per-node") for c in calls(host)} == {"8"}


def test_a_hidden_size_given_wins_over_the_model_and_the_all_reduce_setting_serves_too(host):
    rc, report = probe(host, sglang_allreduce_hidden_size=5120)
    assert rc == 0, failure(report)
    assert {option(c, "--hidden") for c in calls(host)} == {"5120"}
    rc, report = probe(host, sglang_allreduce_hidden_size=5120, gpu_probes_hidden=7168)
    assert rc == 0, failure(report)
    assert [option(c, "--hidden") for c in calls(host)][2:] == ["7168", "7168"]


@pytest.mark.parametrize("variables, reason", [
    (dict(sglang_server_model_path=""), "gpu_probes_model_path, by default sglang_server_model_path, is not set"),
    (dict(sglang_server_model_path="/nonexistent/model"), "/nonexistent/model"),
    (dict(sglang_server_tp_size=1), "no all-reduce on one GPU"),
    (dict(sglang_server_tp_size=16), "(16: gpu_probes_gpus, by default sglang_server_tp_size) and localhost has 8"),
    (dict(gpu_probes_tokens="1,x"), "gpu_probes_tokens (1,x)"),
    (dict(gpu_probes_model_path="relative/model"), "an absolute path"),
])
def test_what_it_cannot_measure_is_refused_before_anything_is_installed(host, variables, reason):
    rc, report = probe(host, **variables)
    name, msg = failure(report)
    assert rc != 0 and reason in msg, (name, msg)
    assert not (host / "tools").exists() and calls(host) == []


# No systemd here: whether the server is active is given the way the role's own read would set it (extra vars win
# over set_fact); molecule's default scenario checks the read itself against a running unit on a lab host.
def test_beside_a_running_server_it_measures_only_when_asked_and_says_so(host):
    rc, report = probe(host, __gpu_probes_serving=True)
    name, msg = failure(report)
    assert rc != 0 and "gpu_probes_while_serving: true" in msg and "systemctl stop sglang" in msg, (name, msg)
    assert not (host / "tools").exists() and calls(host) == []
    rc, report = probe(host, __gpu_probes_serving=True, gpu_probes_while_serving="true")  # as -e passes it
    assert rc == 0, failure(report)
    assert len(calls(host)) == 2
    shown = dict(task_results(report))["Show the comparison"]["msg"]
    assert shown.strip().startswith("Measured beside the running sglang (its load included). NCCL ")


PLANTING = """#!/usr/bin/python3
# Stand-in for the microbenchmark run by a service user gone bad: where its result belongs it leaves a link to a file
# only root may read, and calls it a result.
import os, sys
args = sys.argv[1:]
os.symlink(%(secret)r, args[args.index("--out") + 1])
"""


def test_a_link_left_for_a_result_reaches_nothing_only_root_may_read(host):
    secret = host / "secret"
    secret.write_text("root's alone\n")
    secret.chmod(0o600)
    # The service user (nobody) runs the stand-in: it lives in a folder that user can reach (pytest's are root's 0700).
    with tempfile.TemporaryDirectory(prefix="gpu-probes-reach.") as folder:
        os.chmod(folder, 0o755)
        rc, report = planted_run(host, pathlib.Path(folder), secret)
    assert rc != 0
    assert failure(report)[0] == "Read the results as the service user"
    assert "allreduce-deployed.json: Permission denied" in json.dumps(report)
    assert "root's alone" not in json.dumps(report)
    reports = host / "reports"
    kept = [p.read_text() for p in reports.rglob("*") if p.is_file()] if reports.exists() else []
    assert not any("root's alone" in text for text in kept)


def planted_run(host, reach, secret):
    for folder in (reach / "venv", reach / "venv" / "bin"):
        folder.mkdir()
    (reach / "venv" / "bin" / "python").write_text(PLANTING % {"secret": str(secret)})
    (reach / "venv" / "bin" / "python").chmod(0o755)
    return probe(host, sglang_server_tp_size=2, gpu_probes_user="nobody", gpu_probes_venv=str(reach / "venv"))
