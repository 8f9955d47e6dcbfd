"""The device evidence scripts (scripts/device/*_evidence.sh) at any GPU count, run here without GPUs.

The GPU machine is simulated at its boundary only: `nvidia-smi -L` lists N GPUs, and the image's `python3` is a
stand-in (named so below) that records each `torch.distributed.run` call (its arguments and the NCCL, PyTorch and
NVSHMEM variables it was started with) instead of starting GPU processes; the scripts themselves run as written.
What this holds: one process per listed GPU, NVLink multicast off in every GPU process whatever the caller's
environment says (the device machines' GPUs are shared: multicast-off.env), each benchmark row with exactly its own
NCCL setting, and every step's result in the bundle.
"""
import json
import os
import shlex
import subprocess
import sys

import pytest
from tests.helpers.allreduce_bundles import checker
from tests.helpers.ansible_run import REPO
from tests.helpers.script_module import load_file

DEVICE = os.path.join(REPO, "scripts", "device")
unit_exec = load_file("scripts/device/unit_exec.py", "unit_exec")
MULTICAST_OFF = unit_exec.MULTICAST_OFF
# What the image (or a caller) might have set: an NCCL tuning, and multicast on.
HOSTILE_ENV = {"NCCL_ALGO": "Ring", "NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "1",
               "TORCH_SYMM_MEM_DISABLE_MULTICAST": "0"}

PYTHON_STANDIN = '''#!%(python)s
"""Stand-in for the device image's python3 (torch, FlashInfer, GPUs): records what would have run there."""
import json, os, sys
args = sys.argv[1:]
watched = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_"))}
def record(kind, **extra):
    with open(os.environ["STANDIN_RECORD"], "a") as handle:
        handle.write(json.dumps(dict(kind=kind, env=watched, **extra)) + "\\n")
if args[:2] == ["-m", "torch.distributed.run"]:
    out = args[args.index("--out") + 1]
    record("torchrun", argv=args)
    with open(out, "w") as handle:
        json.dump({"stand_in": True, "argv": args}, handle)
elif args[:2] == ["-m", "pip"]:
    os.makedirs(args[args.index("--target") + 1], exist_ok=True)
elif args[:1] == ["-c"] and "build_and_load" in args[1]:
    record("jit", code=args[1])
elif args[:1] == ["-c"]:
    print("stand-in python3: " + args[1][:40])
elif args[:1] == ["-"] or args[0].endswith(".py"):  # the scripts' own stdlib steps run for real
    os.execv(%(python)r, [%(python)r] + args)
else:
    sys.exit("stand-in python3: unexpected call %%r" %% (args,))
'''


candidates = checker.candidates


def run_script(tmp_path, script, gpus, extra_env=None):
    """Run scripts/device/<script> with N stand-in GPUs; (completed process, recorded calls, $OUT)."""
    if os.path.exists("/opt/torch/.venv/bin/python3"):
        pytest.skip("a device image: the scripts would take its real python3")
    bin_dir, out, sglang_site = tmp_path / "bin", tmp_path / "out", tmp_path / "sglang-site"
    bin_dir.mkdir()
    (sglang_site / "sglang").mkdir(parents=True)
    python = bin_dir / "python3"
    python.write_text(PYTHON_STANDIN % {"python": sys.executable})
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n# stand-in: %d GPUs\n[ \"$1\" = -L ] || exit 0\n" % gpus + "".join(
        "echo 'GPU %d: NVIDIA H200 (UUID: GPU-standin-%d)'\n" % (i, i) for i in range(gpus)))
    for path in (python, smi):
        path.chmod(0o755)
    record = tmp_path / "calls.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_"))}
    env.update(HOSTILE_ENV)
    env.update({"PATH": "%s:%s" % (bin_dir, env["PATH"]), "OUT": str(out), "STANDIN_RECORD": str(record),
                "SGLANG_SITE": str(sglang_site), "SCRATCH": str(tmp_path / "scratch"),
                "WHEELS": str(tmp_path / "no-wheels")})
    env.update(extra_env or {})
    proc = subprocess.run(["bash", os.path.join(DEVICE, script)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    calls = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return proc, calls, out


def step_name(call):
    return os.path.basename(call["argv"][call["argv"].index("--out") + 1])[:-len(".json")]


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_allreduce_evidence_runs_one_process_per_gpu_with_multicast_off(tmp_path, gpus):
    proc, calls, out = run_script(tmp_path, "allreduce_canary_evidence.sh", gpus)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    torchruns = [call for call in calls if call["kind"] == "torchrun"]
    assert torchruns and {call["argv"][call["argv"].index("--nproc-per-node") + 1] for call in torchruns} == {
        str(gpus)}
    for call in calls:  # the JIT builds too
        for name, value in MULTICAST_OFF.items():
            assert call["env"].get(name) == value, (call.get("argv") or call["code"], name)
    steps = [step_name(call) for call in torchruns]
    assert steps == ["canary_sglang_call", "canary_vllm_trigger", "canary_consumer_sglang", "canary_consumer_vllm",
                     "canary_oneshot", "canary_twoshot",
                     "canary_corrupt", "canary_pcie_ipc", "canary_pcie_ipc_corrupt", "bench_defaults"] + [
                         "bench_" + name for name, _ in candidates()]
    bundle = json.loads((out / "allreduce_canary_evidence.json").read_text())
    assert sorted(bundle["results"]) == sorted(steps)
    assert all(any(line.startswith("allreduce_canary: %s: rc=0 " % step) for line in bundle["steps"])
               for step in steps)
    assert "%d GPU(s)" % gpus in "\n".join(bundle["steps"])
    verdict = json.loads((out / "evidence_check.json").read_text())  # stand-in results are never evidence
    assert verdict["gpus"] == gpus and not verdict["passed"] and "canary_sglang_call: no SGLang call recorded" in (
        "\n".join(verdict["problems"]))


def test_each_benchmark_row_has_exactly_its_own_nccl_setting(tmp_path):
    _, calls, _ = run_script(tmp_path, "allreduce_canary_evidence.sh", 4)
    rows = {step_name(call): call for call in calls if call["kind"] == "torchrun" and "--label" in call["argv"]}
    expected = {"bench_defaults": ("defaults", {})}
    expected.update({"bench_" + name: (setting, dict([setting.split("=", 1)])) for name, setting in candidates()})
    assert set(rows) == set(expected)
    for step, (label, nccl) in expected.items():
        argv, env = rows[step]["argv"], rows[step]["env"]
        assert argv[argv.index("--label") + 1] == label
        # none of the caller's NCCL settings: NCCL's defaults plus this row's setting, multicast still off
        assert {k: v for k, v in env.items() if k.startswith("NCCL_")} == dict(
            nccl, NCCL_NVLS_ENABLE=MULTICAST_OFF["NCCL_NVLS_ENABLE"]), step
        # the candidates time NCCL alone (PCIe IPC does not read NCCL's settings): one pcie_ipc column, by defaults
        assert ("--pcie-ipc" in argv and argv[argv.index("--pcie-ipc") + 1] == "off") == (step != "bench_defaults")
    canaries = [call for call in calls if call["kind"] == "torchrun" and "--label" not in call["argv"]]
    assert canaries and all(call["env"]["NCCL_ALGO"] == "Ring" for call in canaries)  # the machine's, untouched


def test_steps_runs_only_the_steps_named(tmp_path):
    _, calls, out = run_script(tmp_path, "allreduce_canary_evidence.sh", 8,
                               {"STEPS": "canary_pcie_ipc bench_p2p_disabled"})
    assert [step_name(call) for call in calls] == ["canary_pcie_ipc", "bench_p2p_disabled"]
    assert sorted(json.loads((out / "allreduce_canary_evidence.json").read_text())["results"]) == [
        "bench_p2p_disabled", "canary_pcie_ipc"]


@pytest.mark.parametrize("gpus", [2, 8])
def test_fusion_probes_evidence_keeps_multicast_off_and_takes_the_candidates(tmp_path, gpus):
    proc, calls, _ = run_script(tmp_path, "fusion_probes_evidence.sh", gpus)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [step_name(call) for call in calls] == [
        "canary", "canary_warm", "canary_corrupt", "canary_wrong_reference", "bench_defaults"] + [
            "bench_" + name for name, _ in candidates()]
    for call in calls:
        assert call["argv"][call["argv"].index("--nproc-per-node") + 1] == str(gpus)
        assert all(call["env"].get(name) == value for name, value in MULTICAST_OFF.items())


def test_the_multicast_off_file_is_what_every_device_process_gets():
    assert MULTICAST_OFF == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                             "NVSHMEM_DISABLE_NVLS": "1"}
    helper = shlex.quote(os.path.join(DEVICE, "device-env.sh"))
    shell = subprocess.run(["bash", "-c", ". %s; multicast_off; env" % helper],
                           env={"PATH": os.environ["PATH"], "NCCL_NVLS_ENABLE": "1"}, capture_output=True,
                           text=True, check=True).stdout
    assert {line.split("=", 1)[0]: line.split("=", 1)[1] for line in shell.splitlines()
            if line.split("=", 1)[0] in MULTICAST_OFF} == MULTICAST_OFF


def test_a_run_split_over_calls_of_one_machine_bundles_every_step_so_far(tmp_path):
    first = tmp_path / "first"
    first.mkdir()
    run_script(first, "allreduce_canary_evidence.sh", 4, {"STEPS": "canary_sglang_call canary_corrupt",
                                                           "SCRATCH": str(tmp_path / "scratch")})
    second = tmp_path / "second"
    second.mkdir()
    _, calls, out = run_script(second, "allreduce_canary_evidence.sh", 4, {"STEPS": "bench_defaults canary_corrupt",
                                                                          "SCRATCH": str(tmp_path / "scratch")})
    assert [step_name(call) for call in calls] == ["canary_corrupt", "bench_defaults"]  # this call's own steps
    bundle = json.loads((out / "allreduce_canary_evidence.json").read_text())
    assert sorted(bundle["results"]) == ["bench_defaults", "canary_corrupt", "canary_sglang_call"]
    ran = [line.split(":")[1].strip() for line in bundle["steps"] if ": rc=" in line and "evidence check" not in line]
    assert ran == ["canary_sglang_call", "canary_corrupt", "canary_corrupt", "bench_defaults"]


def test_a_call_at_another_rank_count_starts_its_bundle_afresh(tmp_path):
    scratch = str(tmp_path / "scratch")
    for name, gpus, env in (("first", 1, {"SHARED_GPU_RANKS": "2", "STEPS": "canary_sglang_call"}),
                            ("second", 1, {"SHARED_GPU_RANKS": "4", "STEPS": "canary_corrupt"}),
                            ("third", 4, {"STEPS": "bench_defaults"})):
        (tmp_path / name).mkdir()
        _, _, out = run_script(tmp_path / name, "allreduce_canary_evidence.sh", gpus, dict(env, SCRATCH=scratch))
        bundle = json.loads((out / "allreduce_canary_evidence.json").read_text())
        assert sorted(bundle["results"]) == [env["STEPS"]], name  # nothing of the call before, at other ranks
        assert sum(": rc=" in line and "evidence check" not in line for line in bundle["steps"]) == 1, name


def test_a_rehearsal_puts_every_rank_on_the_one_gpu_and_is_never_evidence(tmp_path):
    proc, calls, out = run_script(tmp_path, "allreduce_canary_evidence.sh", 1, {"SHARED_GPU_RANKS": "2"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    torchruns = [call for call in calls if call["kind"] == "torchrun"]
    assert [step_name(call) for call in torchruns] == [  # every step: the rows' code runs too, timed or not
        "canary_sglang_call", "canary_vllm_trigger", "canary_consumer_sglang", "canary_consumer_vllm",
        "canary_oneshot", "canary_twoshot", "canary_corrupt", "canary_pcie_ipc", "canary_pcie_ipc_corrupt",
        "bench_defaults"] + ["bench_" + name for name, _ in candidates()]
    for call in torchruns:
        argv = call["argv"]
        assert argv[argv.index("--nproc-per-node") + 1] == "2"
        start = argv.index("--no-python")  # each rank through the wrapper, which then starts the image's python
        assert argv[start + 1:start + 3] == ["bash", "scripts/device/shared_gpu_rank.sh"]
        assert os.path.basename(argv[start + 3]) == "python3"
        if step_name(call).startswith("canary_"):  # the GPU time-slices the ranks: the canaries neither time nor tune
            assert argv[start + 4] == "roles/sglang_allreduce/files/allreduce_canary.py"
            assert "--no-timing" in argv and "--no-tune" in argv
        else:  # a benchmark row runs its code (PCIe IPC tuned as in a real run) with few iterations
            assert argv[start + 4] == "roles/sglang_allreduce/files/allreduce_bench.py"
            assert argv[-4:] == ["--iters", "2", "--reps", "2"] and "--no-pcie-ipc-tune" not in argv
    bundle = json.loads((out / "allreduce_canary_evidence.json").read_text())
    assert bundle["shared_gpu_ranks"] == 2
    assert "1 GPU(s) shared by 2 ranks" in "\n".join(bundle["steps"])
    verdict = json.loads((out / "evidence_check.json").read_text())
    assert not verdict["passed"] and verdict["gpus"] == 1
    assert any(problem.startswith("a rehearsal: 2 ranks shared one GPU") for problem in verdict["problems"])
    assert "canary_sglang_call: world size None, but the run started 2 rank(s)" in verdict["problems"]


@pytest.mark.parametrize("value", ["1", "9", "two"])
def test_a_rehearsal_refuses_a_rank_count_it_cannot_share(tmp_path, value):
    proc, calls, _ = run_script(tmp_path, "allreduce_canary_evidence.sh", 1, {"SHARED_GPU_RANKS": value})
    assert proc.returncode == 2 and not calls
    assert "SHARED_GPU_RANKS must be 2 to 8, not '%s'" % value in proc.stdout


def test_each_shared_rank_is_a_host_of_its_own_for_nccl_on_gpu_0():
    seen = {}
    for rank in ("0", "1"):
        env = dict(os.environ, RANK=rank, LOCAL_RANK=rank)
        proc = subprocess.run(["bash", os.path.join(DEVICE, "shared_gpu_rank.sh"), sys.executable, "-c",
                               "import json, os; print(json.dumps(dict(os.environ)))"], env=env,
                              capture_output=True, text=True, check=True)
        seen[rank] = json.loads(proc.stdout)
    assert seen["0"]["LOCAL_RANK"] == seen["1"]["LOCAL_RANK"] == "0"  # both on GPU 0
    assert seen["0"]["NCCL_HOSTID"] != seen["1"]["NCCL_HOSTID"]  # else NCCL: "Duplicate GPU detected"
    shared = checker.shared_gpu_rank_env()
    assert shared["NCCL_SOCKET_IFNAME"] == "lo"  # NCCL joins the ranks' "hosts" over loopback
    assert all(seen[rank][name] == value for rank in seen for name, value in shared.items())
    proc = subprocess.run(["bash", os.path.join(DEVICE, "shared_gpu_rank.sh"), "true"], capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items() if k != "RANK"}, check=False)
    assert proc.returncode != 0 and "torchrun sets RANK" in proc.stderr
