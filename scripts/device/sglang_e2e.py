#!/usr/bin/env python3
"""The real SGLang server on the GPU test bed, driven by this project's own roles, end to end.

Run on the device machine (scripts/device/sglang_e2e.sh wraps it), in phases so that each call stays inside
the tool's 10-minute limit while the machine stays warm (state in /var/tmp/sglang-e2e):
  setup       unpack the carried wheelhouse, install ansible-core beside the image's Python, generate the random
              test model + EAGLE-3 draft, run scripts/device/sglang_e2e.yml (roles: gpu_preflight, sglang_install
              from the wheelhouse on the image's torch, fusion_patch with its canary, nccl_tuning, sglang_server
              rendering one unit per leg), then start leg 1 from its unit.
  legs [N..]  for each leg: start it from its rendered unit (unless running), wait with the role's readiness
              check, (leg 1) the role's fusion proof on the real log + FlashInfer's API log count + the real
              responses, then SGLang's own client from the deployed venv (the role's bench_runner.py), stop.
  evidence    write h200x<N>_sglang_e2e.json (N: GPUs) from what the legs recorded (run by legs when all are done).
Everything it writes for the caller goes to $OUT.

FlashInfer's trtllm_comm kernel (the fused all-reduce; nvcc takes ~300 s for it on a bare machine) travels between
machines: setup returns the one built here ($OUT/trtllm_comm.so.xz), and a later call that carries it as
.device/e2e-jit/trtllm_comm.so.xz has it placed where FlashInfer loads prebuilt (AOT) kernels, so nothing is built.
E2E_JIT=build makes setup load it as the server would (its user, its environment), which builds it on one GPU too.

E2E_MODEL picks the test model's family (make_test_model.py --arch): qwen3 (the default) or deepseek_v3 (the Kimi-K2
backbone, with the Kimi-K2.5 MLA EAGLE-3 draft; E2E_DRAFT=llama for the Llama-layout one).
E2E_SHARED_GPU_RANKS=2 makes the run a SHARED-GPU REHEARSAL of a two-GPU host on a one-GPU machine: the roles run as
on a TP2 host (preflight and the canary see the GPU once per rank through shared_gpu_nvidia_smi.py, the units are
rendered at TP2 with the fusion flags the patch module published), and only the test bed adds what lets two ranks
share GPU 0: the canary through shared_gpu_rank.sh, each leg's launcher started with SGLang's
SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS, CUDA_VISIBLE_DEVICES=0,1, the shared_gpu_hook/ start-up hook (each rank back on
GPU 0, a host id of its own), shared-gpu-rank.env's NCCL settings and two arguments appended to the unit's
(REHEARSAL_ARGS). A rehearsal adds a control leg: the fusion leg's unit again after the patch module reverted the
patch (state absent), whose proof must fail. Its throughput is time-slicing of one GPU and means nothing.

This file is the command line and the setup phase; e2e_bed.py holds the settings and bookkeeping the phases share,
e2e_legs.py runs each leg, e2e_evidence.py writes the evidence.
"""
import glob
import json
import lzma
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the phases' modules beside it, however this is loaded
import e2e_bed as bed  # noqa: E402  pylint: disable=wrong-import-position
import e2e_evidence  # noqa: E402  pylint: disable=wrong-import-position
import e2e_legs as legs  # noqa: E402  pylint: disable=wrong-import-position
import unit_exec  # noqa: E402  pylint: disable=wrong-import-position

JIT_CARRY = os.path.join(bed.REPO, ".device", "e2e-jit", "trtllm_comm.so.xz")  # returned by an earlier machine's setup
CARRIED_KERNEL = os.path.join(bed.STATE_DIR, "carried", "trtllm_comm.so")
BUILT_KERNEL = os.path.join(bed.STATE_DIR, "trtllm_comm.so")  # sglang_e2e.sh returns it, compressed
# Loads trtllm_comm as SGLang does (FlashInfer's own spec: prebuilt if found, else nvcc) and says which it was.
JIT_LOAD = ("import json, time, flashinfer, flashinfer.jit.comm as c\n"
            "spec = c.gen_trtllm_comm_module(); aot = spec.is_aot; t = time.monotonic(); spec.build_and_load()\n"
            "print(json.dumps({'flashinfer': flashinfer.__version__, 'prebuilt': aot, 'seconds': "
            "round(time.monotonic() - t, 1), 'library': str(spec.aot_path if aot else spec.jit_library_path)}))")


def python_with_torch():
    for candidate in ("/opt/torch/.venv/bin/python3", shutil.which("python3") or "python3"):
        if subprocess.run([candidate, "-c", "import torch"], capture_output=True, check=False).returncode == 0:
            return candidate
    raise SystemExit("no Python with torch on this machine")


def install_rehearsal():
    """The test bed's rehearsal layer, readable by the service user: the rank wrapper and its NCCL settings, the
    nvidia-smi view (a wrapper that names the rank count) and the start-up hook's folder."""
    os.makedirs(bed.REHEARSAL, exist_ok=True)
    for name in ("shared_gpu_rank.sh", "shared-gpu-rank.env", "shared_gpu_nvidia_smi.py"):
        shutil.copy(os.path.join(bed.HERE, name), os.path.join(bed.REHEARSAL, name))
    shutil.copytree(os.path.join(bed.REPO, "module_utils"), os.path.join(bed.REHEARSAL, "module_utils"),
                    dirs_exist_ok=True)
    shutil.copytree(os.path.join(bed.HERE, "shared_gpu_hook"), os.path.join(bed.REHEARSAL, "hook"), dirs_exist_ok=True)
    with open(os.path.join(bed.REHEARSAL, "nvidia-smi"), "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\nexec /usr/bin/python3 %s --ranks %d -- \"$@\"\n"
                     % (os.path.join(bed.REHEARSAL, "shared_gpu_nvidia_smi.py"), bed.RANKS))
    for root, dirs, files in os.walk(bed.REHEARSAL):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755)
    os.chmod(bed.REHEARSAL, 0o755)


def make_key():
    """A throwaway API key for the legs, root's and 0600 as an operator's key file would be. Hex: a urlsafe token
    can begin with "-", which the role refuses (SGLang would take it for an option; the 21:02 UTC run of 2026-12-03
    found that)."""
    fd = os.open(bed.KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_hex(24) + "\n")


def setup(state):
    python = python_with_torch()
    state["python"] = python
    os.makedirs(bed.STATE_DIR, exist_ok=True)
    make_key()
    started = time.monotonic()
    with tarfile.open(os.path.join(bed.REPO, ".device", "carry", "wheelhouse.tar.xz")) as tar:
        tar.extractall(bed.STATE_DIR)  # -> STATE_DIR/wheelhouse/*.whl
    state["steps"].append({"name": "unpack_wheelhouse", "rc": 0, "seconds": round(time.monotonic() - started, 1)})
    tools = [w for w in glob.glob(os.path.join(bed.WHEELHOUSE, "*.whl"))
             if os.path.basename(w).startswith(("ansible_core-", "resolvelib-"))]
    if bed.step(state, "install_ansible_core", [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                            "--target", bed.SITE] + tools, 120):
        return 1
    for tool in tools:  # they travel in the wheelhouse but are not in the lock
        os.unlink(tool)
    if bed.RANKS:
        install_rehearsal()
    if bed.step(state, "make_test_model", [python, os.path.join(bed.HERE, "make_test_model.py"), "--out", bed.MODELS,
                                       "--arch", bed.FAMILY, "--draft", bed.DRAFT, "--decisive", str(bed.DECISIVE),
                                       "--hidden", str(bed.HIDDEN), "--layers", str(bed.LAYERS)], 300):
        return 1
    extra = {}
    if os.path.exists(JIT_CARRY):
        started = time.monotonic()
        os.makedirs(os.path.dirname(CARRIED_KERNEL), exist_ok=True)
        with lzma.open(JIT_CARRY) as packed, open(CARRIED_KERNEL, "wb") as kernel:
            shutil.copyfileobj(packed, kernel)
        state["steps"].append({"name": "unpack_carried_trtllm_comm", "rc": 0,
                               "seconds": round(time.monotonic() - started, 1)})
        extra["e2e_trtllm_comm_so"] = CARRIED_KERNEL
    if bed.playbook(state, "setup", python, extra):
        return 1
    if os.environ.get("E2E_JIT") == "build" and load_kernel(state):
        return 1
    collect_jit(state)
    return legs.start_leg(state, next(i for i in range(len(bed.LEGS)) if bed.runnable(i)))


def load_kernel(state):
    """trtllm_comm loaded as the server loads it: the unit's interpreter, user and environment (nvcc builds it
    there unless it was carried). What FlashInfer reported goes to the state as trtllm_comm."""
    unit, _passed, popen = unit_exec.as_service(bed.unit_path())
    rc = bed.step(state, "load_trtllm_comm", [unit["ExecStart"][0], "-c", JIT_LOAD], 560, popen=popen)
    with open(os.path.join(bed.OUT, "load_trtllm_comm.log"), encoding="utf-8", errors="replace") as handle:
        reports = [line for line in handle.read().splitlines() if line.startswith("{")]
    state["trtllm_comm"] = json.loads(reports[-1]) if rc == 0 and reports else {"error": "rc %d" % rc}
    bed.save_state(state)
    return rc


def collect_jit(state):
    """FlashInfer's trtllm_comm, if nvcc built it here (the canary's or load_kernel's build), for sglang_e2e.sh to
    return: a fresh machine can carry it instead of building it. Searched for under the server's own
    FLASHINFER_WORKSPACE_BASE (read from its unit), hidden directories included (FlashInfer builds in .cache/)."""
    _unit, _passed, popen = unit_exec.as_service(bed.unit_path())
    base = popen["env"].get("FLASHINFER_WORKSPACE_BASE", "")
    for folder, _dirs, files in os.walk(base):
        if "trtllm_comm.so" in files and os.path.basename(folder) == "trtllm_comm":
            shutil.copy(os.path.join(folder, "trtllm_comm.so"), BUILT_KERNEL)
            state["trtllm_comm_built"] = os.path.join(folder, "trtllm_comm.so")
            bed.save_state(state)
            return


def main(argv):
    os.makedirs(bed.OUT, exist_ok=True)
    os.makedirs(bed.RECORDS, exist_ok=True)
    state = bed.load_state()
    if argv[0] == "setup":
        return setup(state)
    if argv[0] == "legs":
        for index in [int(a) for a in argv[1:]] or range(len(bed.LEGS)):
            if state["legs"].get(bed.LEGS[index][0], {}).get("bench_rc") == 0 or not bed.runnable(index):
                continue  # measured in an earlier call, or cannot run on this machine
            if legs.run_leg(state, index):
                return 1
        if all(state["legs"].get(bed.LEGS[i][0], {}).get("bench_rc") == 0
               for i in range(len(bed.LEGS)) if bed.runnable(i)):
            return e2e_evidence.evidence(state)
        return 0
    if argv[0] == "evidence":
        return e2e_evidence.evidence(state)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["--help"]))
