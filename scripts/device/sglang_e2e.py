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
"""
import glob
import json
import lzma
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(REPO, "module_utils"))  # the gate's own arithmetic (stdlib only), on real answers
sys.path.insert(2, os.path.join(REPO, "roles", "sglang_server", "files"))  # the role's journal redaction
import project_utils  # noqa: E402  pylint: disable=wrong-import-position
project_utils.importable()
import bench_gate  # noqa: E402  pylint: disable=wrong-import-position
import fusion_evidence  # noqa: E402  pylint: disable=wrong-import-position
import greedy_ties  # noqa: E402  pylint: disable=wrong-import-position
import journal_excerpt  # noqa: E402  pylint: disable=wrong-import-position
import unit_exec  # noqa: E402  pylint: disable=wrong-import-position

STATE_DIR = "/var/tmp/sglang-e2e"
FAMILY = os.environ.get("E2E_MODEL") or "qwen3"
if FAMILY not in ("qwen3", "deepseek_v3"):
    raise SystemExit("E2E_MODEL must be qwen3 or deepseek_v3, not %r" % FAMILY)
DRAFT = os.environ.get("E2E_DRAFT") or "mla"
RANKS = int(os.environ.get("E2E_SHARED_GPU_RANKS") or 0)
if RANKS and RANKS != 2:
    raise SystemExit("E2E_SHARED_GPU_RANKS: only 2 is rehearsed (got %d)" % RANKS)
# one state and one results folder per family, draft and mode
RUN = FAMILY + ("-llama-draft" if FAMILY == "deepseek_v3" and DRAFT == "llama" else "") + (
    "-shared%d" % RANKS if RANKS else "")
STATE = os.path.join(STATE_DIR, "state-%s.json" % RUN)
OUT = os.path.join(STATE_DIR, "out", RUN)  # sglang_e2e.sh packs STATE_DIR/out into $OUT
RECORDS = os.path.join(STATE_DIR, "records", RUN)  # what the playbook keeps for the evidence
SITE = os.path.join(STATE_DIR, "site")            # ansible-core for the image's Python
WHEELHOUSE = os.path.join(STATE_DIR, "wheelhouse")
# Every leg's unit is rendered with an API key (sglang_server_api_key_file), so the role's key path (--config
# options file, readiness, proof, the gate's client) runs against the real server; a throwaway made by setup.
KEY_FILE = os.path.join(STATE_DIR, "api-key")
MODELS = "/srv/models/e2e" + ("" if FAMILY == "qwen3" else "-" + FAMILY)
HIDDEN = 2048
LAYERS = 4
# deepseek_v3: a successor part in the output head, so greedy decisions win by far more than bf16 rounding
# (make_test_model.py --decisive; the margins are measured on the CPU, greedy_margins.py). Qwen3 stays the random
# model of the earlier evidence.
DECISIVE_BY_FAMILY = {"qwen3": 0, "deepseek_v3": 16}
DECISIVE = DECISIVE_BY_FAMILY[FAMILY]
PORT = 30000
BASE_URL = "http://127.0.0.1:%d" % PORT
LEGS = [  # name, unit, speculative, fusion (the unit's index in sglang_e2e.yml's e2e_legs is the unit's order here)
    ("spec_fusion", "sglang", True, True),
    ("spec_nofusion", "sglang-nofusion", True, False),
    ("plain", "sglang-plain", False, False),
] + ([("control", "sglang", True, True)] if RANKS else [])  # the fusion unit after the patch was reverted
UNITS = ["sglang", "sglang-nofusion", "sglang-plain"]
# A rehearsal's additions to each leg's start (never in a unit): two ranks in one GPU's memory, no custom all-reduce
# (its IPC buffers assume a GPU per rank).
REHEARSAL = os.path.join(STATE_DIR, "rehearsal")  # the rank wrapper, the nvidia-smi view and the hook, for any user
REHEARSAL_ARGS = ["--disable-custom-all-reduce"]
REHEARSAL_MEM_FRACTION = 0.3
PROMPTS = ["the model reads the bridge", "a quick answer to the question", "tokens flow through the layers",
           "the server starts and waits", "one more prompt for the check", "speculation drafts and verifies",
           "fusion of the reduce and the norm", "greedy decoding is lossless"]
GREEDY_TOKENS = 8  # new tokens per prompt in the greedy comparison of the legs
API_LOG = "/var/lib/sglang/flashinfer-api-%i.log"
JIT_CARRY = os.path.join(REPO, ".device", "e2e-jit", "trtllm_comm.so.xz")  # returned by an earlier machine's setup
CARRIED_KERNEL = os.path.join(STATE_DIR, "carried", "trtllm_comm.so")
BUILT_KERNEL = os.path.join(STATE_DIR, "trtllm_comm.so")  # sglang_e2e.sh returns it, compressed
# Loads trtllm_comm as SGLang does (FlashInfer's own spec: prebuilt if found, else nvcc) and says which it was.
JIT_LOAD = ("import json, time, flashinfer, flashinfer.jit.comm as c\n"
            "spec = c.gen_trtllm_comm_module(); aot = spec.is_aot; t = time.monotonic(); spec.build_and_load()\n"
            "print(json.dumps({'flashinfer': flashinfer.__version__, 'prebuilt': aot, 'seconds': "
            "round(time.monotonic() - t, 1), 'library': str(spec.aot_path if aot else spec.jit_library_path)}))")


def gpu_count():
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(line.startswith("GPU ") for line in out.splitlines())


def tp_size():
    """The ranks the roles deploy for: a rehearsal's, or one per GPU."""
    return RANKS or gpu_count()


def runnable(index):
    """Fusion needs tensor parallelism: on a one-GPU machine (no rehearsal) the fusion legs cannot run."""
    return not LEGS[index][3] or tp_size() > 1


def evidence_name(kind):
    """h200x<GPUs>[_shared<ranks>][_<family>]_<kind>.json: the rehearsal's main family (deepseek_v3) and the
    one-GPU run's (qwen3) keep the short names."""
    main_family = "deepseek_v3" if RANKS else "qwen3"
    model = next((word.lower() for name in gpus()["names"] for word in name.split() if word[:1] in "HB"
                  and word[1:].isdigit()), "gpu")  # "NVIDIA H200" -> h200
    return "%sx%d%s%s_%s.json" % (model, gpu_count(), "_shared%d" % RANKS if RANKS else "",
                                  "" if FAMILY == main_family else "_" + FAMILY, kind)


def python_with_torch():
    for candidate in ("/opt/torch/.venv/bin/python3", shutil.which("python3") or "python3"):
        if subprocess.run([candidate, "-c", "import torch"], capture_output=True, check=False).returncode == 0:
            return candidate
    raise SystemExit("no Python with torch on this machine")


def load_state():
    if os.path.exists(STATE):
        with open(STATE, encoding="utf-8") as handle:
            return json.load(handle)
    return {"steps": [], "legs": {}}


def save_state(state):
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(STATE + ".new", "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=1)
    os.replace(STATE + ".new", STATE)
    shutil.copy(STATE, os.path.join(OUT, "state.json"))


def step(state, name, command, timeout, log_name=None, env=None, popen=None):
    """Run one step, log it to $OUT, record its rc and seconds (popen: another process's cwd, env, user...)."""
    started = time.monotonic()
    log_path = os.path.join(OUT, (log_name or name) + ".log")
    with open(log_path, "ab") as log:
        try:
            rc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False,
                                **(popen or {"env": env, "cwd": REPO})).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    record = {"name": name, "rc": rc, "seconds": round(time.monotonic() - started, 1)}
    state["steps"].append(record)
    save_state(state)
    print("step %s: rc=%s %ss" % (name, rc, record["seconds"]), flush=True)
    return rc


def ansible_env():
    env = dict(os.environ, PYTHONPATH=SITE, LC_ALL="C.UTF-8", LANG="C.UTF-8",
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_LOCALHOST_WARNING="0")
    env.update(unit_exec.MULTICAST_OFF)
    return env


def playbook(state, phase, python, extra=None, log_name=None):
    variables = {"e2e_phase": phase, "e2e_python": python, "e2e_gpus": tp_size(), "e2e_wheelhouse": WHEELHOUSE,
                 "e2e_model_dir": MODELS, "e2e_multicast_off": unit_exec.MULTICAST_OFF, "e2e_api_key_file": KEY_FILE,
                 "e2e_nvidia_smi": os.path.join(REHEARSAL, "nvidia-smi") if RANKS else "nvidia-smi",
                 "e2e_canary_command": rehearsal_canary_command() if RANKS else [],
                 "e2e_mem_fraction": REHEARSAL_MEM_FRACTION if RANKS else 0.5, "e2e_record_dir": RECORDS,
                 # after setup: the fusion flags setup published (the control's unit keeps them), the patch's state
                 "e2e_fusion_args": patch_record("setup").get("server_args", []), "e2e_prove_unit": 0,
                 "e2e_patch_state": "absent" if state.get("patch_reverted") else "present",
                 "e2e_api_log": "",
                 "ansible_python_interpreter": python}
    variables.update(extra or {})
    command = [python, os.path.join(SITE, "bin", "ansible-playbook")]
    command += ["-i", "localhost,", os.path.join(HERE, "sglang_e2e.yml"), "-e", json.dumps(variables)]
    return step(state, "ansible_" + phase, command, 560, env=ansible_env(), log_name=log_name)


def patch_record(phase):
    """What the patch module did in PHASE (setup, revert), as sglang_e2e.yml kept it: result, server_args, canary."""
    path = os.path.join(RECORDS, "fusion-patch-%s.json" % phase)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def rehearsal_canary_command():
    """The fusion canary's command in a rehearsal: torchrun from the venv, each rank through shared_gpu_rank.sh (GPU
    0, a host id of its own); the role appends its arguments and --out."""
    venv_python = "/opt/sglang/current/bin/python"
    return [venv_python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(RANKS), "--no-python",
            "bash", os.path.join(REHEARSAL, "shared_gpu_rank.sh"), venv_python, "/usr/local/lib/sglang-allreduce/allreduce_canary.py"]


def install_rehearsal():
    """The test bed's rehearsal layer, readable by the service user: the rank wrapper and its NCCL settings, the
    nvidia-smi view (a wrapper that names the rank count) and the start-up hook's folder."""
    os.makedirs(REHEARSAL, exist_ok=True)
    for name in ("shared_gpu_rank.sh", "shared-gpu-rank.env", "shared_gpu_nvidia_smi.py"):
        shutil.copy(os.path.join(HERE, name), os.path.join(REHEARSAL, name))
    shutil.copytree(os.path.join(REPO, "module_utils"), os.path.join(REHEARSAL, "module_utils"), dirs_exist_ok=True)
    shutil.copytree(os.path.join(HERE, "shared_gpu_hook"), os.path.join(REHEARSAL, "hook"), dirs_exist_ok=True)
    with open(os.path.join(REHEARSAL, "nvidia-smi"), "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\nexec /usr/bin/python3 %s --ranks %d -- \"$@\"\n"
                     % (os.path.join(REHEARSAL, "shared_gpu_nvidia_smi.py"), RANKS))
    for root, dirs, files in os.walk(REHEARSAL):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755)
    os.chmod(REHEARSAL, 0o755)


def rehearsal_env():
    """What a rehearsal leg's launcher gets besides the unit's environment (never written into a unit)."""
    env = {"SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS": "1", "CUDA_VISIBLE_DEVICES": "0,1",
           "PYTHONPATH": os.path.join(REHEARSAL, "hook"), "E2E_SHARED_GPU_RANKS": str(RANKS)}
    env.update(unit_exec.read_env_file(os.path.join(HERE, "shared-gpu-rank.env")))
    return env


def make_key():
    """A throwaway API key for the legs, root's and 0600 as an operator's key file would be. Hex: a urlsafe token
    can begin with "-", which the role refuses (SGLang would take it for an option; the 21:02 UTC run of 2026-12-03
    found that)."""
    fd = os.open(KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_hex(24) + "\n")


def api_key():
    with open(KEY_FILE, encoding="utf-8") as handle:
        return handle.read().strip()


def redacted(text):
    """TEXT with the key taken out by the role's own redaction (journal_excerpt.py), for what is recorded."""
    return journal_excerpt.redact(text, [api_key()])


def setup(state):
    python = python_with_torch()
    state["python"] = python
    os.makedirs(STATE_DIR, exist_ok=True)
    make_key()
    started = time.monotonic()
    with tarfile.open(os.path.join(REPO, ".device", "carry", "wheelhouse.tar.xz")) as tar:
        tar.extractall(STATE_DIR)  # -> STATE_DIR/wheelhouse/*.whl
    state["steps"].append({"name": "unpack_wheelhouse", "rc": 0, "seconds": round(time.monotonic() - started, 1)})
    tools = [w for w in glob.glob(os.path.join(WHEELHOUSE, "*.whl"))
             if os.path.basename(w).startswith(("ansible_core-", "resolvelib-"))]
    if step(state, "install_ansible_core", [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                            "--target", SITE] + tools, 120):
        return 1
    for tool in tools:  # they travel in the wheelhouse but are not in the lock
        os.unlink(tool)
    if RANKS:
        install_rehearsal()
    if step(state, "make_test_model", [python, os.path.join(HERE, "make_test_model.py"), "--out", MODELS,
                                       "--arch", FAMILY, "--draft", DRAFT, "--decisive", str(DECISIVE),
                                       "--hidden", str(HIDDEN), "--layers", str(LAYERS)], 300):
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
    if playbook(state, "setup", python, extra):
        return 1
    if os.environ.get("E2E_JIT") == "build" and load_kernel(state):
        return 1
    collect_jit(state)
    return start_leg(state, next(i for i in range(len(LEGS)) if runnable(i)))


def unit_path(index=0):
    return "/etc/systemd/system/%s.service" % LEGS[index][1]


def control(index):
    return LEGS[index][0] == "control"


def load_kernel(state):
    """trtllm_comm loaded as the server loads it: the unit's interpreter, user and environment (nvcc builds it
    there unless it was carried). What FlashInfer reported goes to the state as trtllm_comm."""
    unit, _passed, popen = unit_exec.as_service(unit_path())
    rc = step(state, "load_trtllm_comm", [unit["ExecStart"][0], "-c", JIT_LOAD], 560, popen=popen)
    with open(os.path.join(OUT, "load_trtllm_comm.log"), encoding="utf-8", errors="replace") as handle:
        reports = [line for line in handle.read().splitlines() if line.startswith("{")]
    state["trtllm_comm"] = json.loads(reports[-1]) if rc == 0 and reports else {"error": "rc %d" % rc}
    save_state(state)
    return rc


def collect_jit(state):
    """FlashInfer's trtllm_comm, if nvcc built it here (the canary's or load_kernel's build), for sglang_e2e.sh to
    return: a fresh machine can carry it instead of building it. Searched for under the server's own
    FLASHINFER_WORKSPACE_BASE (read from its unit), hidden directories included (FlashInfer builds in .cache/)."""
    _unit, _passed, popen = unit_exec.as_service(unit_path())
    base = popen["env"].get("FLASHINFER_WORKSPACE_BASE", "")
    for folder, _dirs, files in os.walk(base):
        if "trtllm_comm.so" in files and os.path.basename(folder) == "trtllm_comm":
            shutil.copy(os.path.join(folder, "trtllm_comm.so"), BUILT_KERNEL)
            state["trtllm_comm_built"] = os.path.join(folder, "trtllm_comm.so")
            save_state(state)
            return


def start_leg(state, index):
    name, _unit, _spec, fusion = LEGS[index]
    if control(index) and not state.get("patch_reverted"):
        # the control: the fusion leg's own unit, after the patch module took the patch out (state absent)
        rc = playbook(state, "revert", state["python"], log_name="ansible_revert")
        state["patch_reverted"] = rc == 0
        save_state(state)
        if rc:
            return 1
    taken = http("GET", "/health", authorization=None)[0]
    if taken is not None:  # another server answers there: its answers would be taken for this leg's
        print("port %d already answers (%s): a server of an earlier leg or job still runs; not starting %s"
              % (PORT, taken, name), flush=True)
        return 1
    log_path = "/var/log/sglang-e2e-%s-%s.log" % (RUN, name)
    if os.path.exists(log_path):
        os.unlink(log_path)
    # FlashInfer's API log counts the fused kernel's calls: on in every leg of a rehearsal (0 is evidence too)
    extra = {"FLASHINFER_LOGLEVEL": "1", "FLASHINFER_LOGDEST": API_LOG} if fusion or RANKS else {}
    extra.update(rehearsal_env() if RANKS else {})
    for old in glob.glob(API_LOG.replace("%i", "*")):
        os.unlink(old)
    started = unit_exec.start(unit_path(index), log_path, extra, REHEARSAL_ARGS if RANKS else ())
    started["started_at"] = time.time()
    state["legs"].setdefault(name, {})["server"] = started
    save_state(state)
    print("started %s: pid %d" % (name, started["pid"]), flush=True)
    return 0


def http(method, path, body=None, timeout=60, authorization=""):
    """(status, content type, text) of one request; AUTHORIZATION: the header (None: none; default: the key's)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    if authorization is not None:
        headers["Authorization"] = authorization or "Bearer " + api_key()
    request = urllib.request.Request(BASE_URL + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type"), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        return None, None, str(exc)


TEXT_KEPT = {"/metrics": 200000}  # every metric family the real server exposes, for the stand-in's fidelity test


def record_responses():
    """What the stand-in imitates, from the real server: status, content type, body (JSON parsed), asked with the
    key (the key taken out of what is kept: /server_info serves it)."""
    calls = [("GET", "/health", None), ("GET", "/health_generate", None), ("GET", "/ready", None),
             ("GET", "/server_info", None), ("GET", "/get_server_info", None), ("GET", "/model_info", None),
             ("GET", "/get_model_info", None), ("GET", "/v1/models", None),
             ("POST", "/generate", {"text": PROMPTS[0], "sampling_params": {"temperature": 0, "max_new_tokens": 8}}),
             ("POST", "/generate", {"text": PROMPTS[0], "sampling_params": {"temperature": 0, "max_new_tokens": 8},
                                    "return_logprob": True, "top_logprobs_num": 2}),  # as the gate's runner asks
             ("POST", "/v1/completions", {"model": "default", "prompt": PROMPTS[0], "max_tokens": 8,
                                          "temperature": 0}),
             ("POST", "/v1/chat/completions", {"model": "default", "max_tokens": 8, "temperature": 0,
                                               "messages": [{"role": "user", "content": PROMPTS[0]}]}),
             ("GET", "/metrics", None), ("POST", "/flush_cache", None), ("GET", "/no_such_path", None)]
    return [recorded(method, path, body) for method, path, body in calls]


def recorded(method, path, body, authorization=""):
    """One request and the real answer as kept: status, content type, body (JSON parsed), the key taken out."""
    status, ctype, text = http(method, path, body, authorization=authorization)
    text = redacted(text)
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    return {"method": method, "path": path, "request": body, "status": status, "content_type": ctype,
            "json": parsed, "text": None if parsed is not None else text[:TEXT_KEPT.get(path, 2000)]}


def record_unauthorized():
    """The real server's answers without the key, with a wrong one, and with the scheme in lower case: what the
    API key protects (the stand-in imitates utils/auth.py)."""
    generate = {"text": PROMPTS[0], "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
    completion = {"model": "default", "prompt": PROMPTS[0], "max_tokens": 8, "temperature": 0}
    calls = [("GET", "/health", None), ("GET", "/health_generate", None), ("GET", "/metrics", None),
             ("GET", "/ready", None), ("GET", "/server_info", None), ("GET", "/get_server_info", None),
             ("GET", "/model_info", None), ("GET", "/v1/models", None), ("POST", "/generate", generate),
             ("POST", "/v1/completions", completion), ("POST", "/flush_cache", None), ("GET", "/no_such_path", None)]
    out = []
    for auth, header in (("none", None), ("wrong", "Bearer not-the-key"), ("lowercase_scheme", "bearer " + api_key())):
        for method, path, body in calls if auth == "none" else calls[7:9]:
            out.append(dict(recorded(method, path, body, authorization=header), auth=auth))
    return out


def key_exposure(log_path):
    """Where the real server's key can be read: its log (SGLang logs server_args), the role's redacted excerpt of
    it, and every process's arguments and environment (the key must reach neither)."""
    key = api_key()
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        log = handle.read()
    excerpt = journal_excerpt.redact(log, [key])
    found = {"cmdline": 0, "environ": 0}
    for proc in glob.glob("/proc/[0-9]*"):
        for name in found:
            try:
                with open(os.path.join(proc, name), "rb") as handle:
                    found[name] += key.encode() in handle.read()
            except OSError:
                pass  # gone, or a kernel thread
    return {"in_raw_log": log.count(key), "in_redacted_log": excerpt.count(key),
            "redactions": excerpt.count(journal_excerpt.REDACTED), "processes_with_it_in_args": found["cmdline"],
            "processes_with_it_in_environment": found["environ"]}


def api_log_counts():
    lines = []
    for path in glob.glob(API_LOG.replace("%i", "*")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines += handle.read().splitlines()
    return fusion_evidence.api_call_counts(lines)


def greedy_logprobs():
    """Each prompt's greedy output with the server's top-2 logprobs per position, asked apart from the benchmark
    client's completions (which stay what the legs are compared on): where two legs part, these say whether the two
    tokens were tied (greedy_ties.py)."""
    out = {}
    for prompt in PROMPTS:
        status, _ctype, text = http("POST", "/generate", {
            "text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": GREEDY_TOKENS},
            "return_logprob": True, "top_logprobs_num": 2})
        try:
            reply = json.loads(text)
            out[prompt] = {"status": status, "output_ids": reply.get("output_ids"),
                           "top_logprobs": reply["meta_info"].get("output_top_logprobs")}
        except (ValueError, KeyError, TypeError, AttributeError):
            out[prompt] = {"status": status, "error": (text or "")[:500]}
    return out


def bench(state, name, python_client):
    settings = {"base_url": BASE_URL, "tokenizer": MODELS + "/target", "input_len": 128, "output_len": 64,
                # a rehearsal's throughput is time-slicing of one GPU: one run is enough to prove the client runs
                "num_prompts": 16, "seed": 1, "repeats": 1 if RANKS else 3, "warmup_requests": 2, "concurrencies": [1],
                "run_timeout_s": 150, "request_timeout_s": 60, "correctness": True, "prompts": PROMPTS,
                "correctness_max_new_tokens": GREEDY_TOKENS, "extra_client_args": [], "api_key_file": KEY_FILE}
    path = os.path.join(STATE_DIR, "bench-%s-%s.json" % (RUN, name))
    started = time.monotonic()
    with open(path, "wb") as handle:
        proc = subprocess.run([python_client, os.path.join(REPO, "roles/sglang_benchmark/files/bench_runner.py"),
                               json.dumps(settings)], stdout=handle, stderr=subprocess.PIPE, timeout=540,
                              check=False, env=dict(os.environ, **unit_exec.MULTICAST_OFF))
    state["steps"].append({"name": "bench_" + name, "rc": proc.returncode,
                           "seconds": round(time.monotonic() - started, 1)})
    shutil.copy(path, os.path.join(OUT, "bench-%s.json" % name))
    if proc.returncode:
        with open(os.path.join(OUT, "bench-%s.err" % name), "wb") as handle:
            handle.write(proc.stderr[-20000:])
    return proc.returncode


def run_leg(state, index):
    name, unit, spec, fusion = LEGS[index]
    leg = state["legs"].setdefault(name, {})
    server = leg.get("server")
    if not server or unit_exec.process_gone(server["pid"]):
        if start_leg(state, index):
            return 1
        server = leg["server"]
    started = time.monotonic()
    proc = subprocess.run(["/usr/bin/env", "python3", os.path.join(REPO, "roles/sglang_server/files/wait_ready.py"),
                           "--url", BASE_URL + "/health_generate", "--pid", str(server["pid"]),
                           "--timeout", "420", "--poll", "3", "--key-file", KEY_FILE],
                          capture_output=True, text=True, check=False)
    leg["ready"] = json.loads(proc.stdout or "{}")
    leg["ready"]["since_start_s"] = round(time.time() - server["started_at"], 1)
    state["steps"].append({"name": "wait_ready_" + name, "rc": proc.returncode,
                           "seconds": round(time.monotonic() - started, 1)})
    save_state(state)
    shutil.copy(server["log"], os.path.join(OUT, "server-%s.log" % name))
    if proc.returncode:  # never ready: stopped, so that the port is free for whatever runs next
        leg["stopped"] = unit_exec.stop(server["pid"], grace_s=server["timeout_stop_s"])
        save_state(state)
        return 1
    leg["health_generate_status"] = http("GET", "/health_generate")[0]
    first = index == next(i for i in range(len(LEGS)) if runnable(i))  # the first leg that runs here
    if first or RANKS:  # the role's proof, on every leg of a rehearsal
        proof_log = "ansible_prove_%s" % name
        rc = playbook(state, "prove", state["python"], {
            "e2e_log_file": server["log"], "e2e_prove_unit": UNITS.index(unit),
            "e2e_api_log": API_LOG if fusion or RANKS else ""}, log_name=proof_log)
        with open(os.path.join(OUT, proof_log + ".log"), encoding="utf-8", errors="replace") as handle:
            leg["proof"], leg["proof_message"] = fusion_evidence.proof_outcome(rc, redacted(handle.read()))
        leg["prove_rc"] = rc
    with open(server["log"], encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    leg["fusion_log_lines"] = [redacted(l) for l in lines if any(key in l for key in fusion_evidence.FUSION_ON)]
    leg["fusion_off_lines"] = [redacted(l) for l in lines if any(key in l for key in fusion_evidence.FUSION_OFF)]
    if first:
        state["first_leg"] = name
        leg["responses"] = record_responses()
        leg["unauthorized"] = record_unauthorized()
        leg["api_key"] = key_exposure(server["log"])
        leg["log_lines"] = [redacted(l) for l in lines if any(key in l for key in (
            "fired up and ready to roll", "Uvicorn running on", "Load weight end", "Capture", "max_total_num_tokens",
            "server_args=", "Started server process", "Application startup complete", "FlashInfer", "EAGLE",
            "deprecated"))][:80]
    client = "/opt/sglang/current/bin/python"
    leg["bench_rc"] = bench(state, name, client)
    leg["greedy_logprobs"] = greedy_logprobs()
    if fusion or RANKS:
        leg["flashinfer_api_calls"] = api_log_counts()
        for path in glob.glob(API_LOG.replace("%i", "*"))[:2]:  # the first lines only: the log grows per call
            with open(path, "rb") as source, open(os.path.join(OUT, "%s-%s" % (name, os.path.basename(path))),
                                                  "wb") as copy:
                copy.write(source.read(200000))
    # as systemd stops the unit: TERM to the group, KILL after the unit's TimeoutStopSec
    leg["stopped"] = dict(unit_exec.stop(server["pid"], grace_s=server["timeout_stop_s"]),
                          timeout_stop_s=server["timeout_stop_s"])
    shutil.copy(server["log"], os.path.join(OUT, "server-%s.log" % name))
    save_state(state)
    return 0


def venv_versions():
    code = ("import importlib.metadata as m, json; print(json.dumps({d: m.version(d) for d in "
            "('sglang', 'flashinfer-python', 'torch', 'sglang-kernel', 'transformers')}))")
    out = subprocess.run(["/opt/sglang/current/bin/python", "-c", code], capture_output=True, text=True, check=False)
    return json.loads(out.stdout or "{}")


def gpus():
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=False).stdout
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return {"count": len(rows), "names": [r[0] for r in rows], "compute_capability": sorted({r[1] for r in rows}),
            "driver": sorted({r[2] for r in rows})}


def leg_summary(name, spec, fusion):
    with open(os.path.join(STATE_DIR, "bench-%s-%s.json" % (RUN, name)), encoding="utf-8") as handle:
        report = json.load(handle)
    results = [run["result"] or {} for run in report["runs"]]
    tok_s = [r.get("output_throughput") for r in results if r.get("output_throughput") is not None]
    accept = [r.get("accept_length") for r in results if r.get("accept_length") is not None]
    return report, {"name": name, "speculative": spec, "fusion": fusion,
                    "output_tok_s": round(statistics.median(tok_s), 2) if tok_s else None,
                    "runs": [round(t, 2) for t in tok_s], "completed": min((r.get("completed") or 0) for r in results),
                    "num_prompts": report["settings"]["num_prompts"],
                    "accept_length": round(statistics.median(accept), 3) if accept else None,
                    "server": report.get("server"), "errors": [run["error"] for run in report["runs"] if run["error"]]}


def logprob_requests(state, name):
    """{prompt: {"output_ids", "top_logprobs"}} of one leg's logprob requests (greedy_logprobs; {} where none)."""
    return state["legs"].get(name, {}).get("greedy_logprobs", {})


def completions(report):
    """{prompt: output ids} of the benchmark client's greedy completions (what the legs are compared on)."""
    return {c["prompt"]: c.get("output_ids") for c in report["completions"]}


def gate_correctness(plain, leg):
    """bench_gate.compare_completions of a leg's runner completions against the plain leg's, as the gate judges."""
    result = bench_gate.compare_completions(plain["completions"], leg["completions"])
    return {"match_rate": round(result["match_rate"], 3), "ties": result["ties"],
            "tie_at": {row["prompt"]: row["tie_at"] for row in result["rows"] if row["tie_at"] is not None},
            "tie_max_gap": bench_gate.TIE_MAX_GAP}


def evidence(state):
    versions = venv_versions()
    with open(os.path.join(MODELS, "target", "config.json"), encoding="utf-8") as handle:
        target = json.load(handle)
    with open(os.path.join(MODELS, "draft", "config.json"), encoding="utf-8") as handle:
        draft = json.load(handle)
    reports, legs, not_run = {}, [], []
    for index, (name, _unit, spec, fusion) in enumerate(LEGS):
        if not runnable(index):
            not_run.append({"name": name, "speculative": spec, "fusion": fusion,
                            "reason": "fusion needs two or more GPUs (tensor parallelism); this machine has %d"
                                      % gpu_count()})
            continue
        reports[name], summary = leg_summary(name, spec, fusion)
        recorded = state["legs"].get(name, {})
        summary.update(control=control(index), proof=recorded.get("proof"), proof_message=recorded.get("proof_message"),
                       fused_kernel_calls=fusion_evidence.fused_kernel_calls(recorded.get("flashinfer_api_calls")),
                       flashinfer_api_calls=recorded.get("flashinfer_api_calls"),
                       fusion_log_lines=recorded.get("fusion_log_lines"),
                       fusion_off_lines=recorded.get("fusion_off_lines"))
        legs.append(summary)
    plain = completions(reports["plain"])
    match, explained = {}, {}
    # each leg against the plain one; a rehearsal also the fused leg against its unfused twin (same speculation)
    pairs = [("plain", n) for n in reports if n != "plain"]
    pairs += [("spec_nofusion", "spec_fusion")] if RANKS and "spec_fusion" in reports else []
    for base, name in pairs:
        key = name if base == "plain" else "%s_vs_%s" % (name, base)
        theirs = completions(reports[base])
        same = [c.get("output_ids") is not None and c.get("output_ids") == theirs.get(c["prompt"])
                for c in reports[name]["completions"]]
        match[key] = round(sum(same) / len(same), 3) if same else None
        found = greedy_ties.mismatches(PROMPTS, theirs, completions(reports[name]), logprob_requests(state, base),
                                       logprob_requests(state, name))
        explained[key] = {"counts": greedy_ties.summary(found), "mismatches": found}
    repeated = {}
    for name in reports:
        found = greedy_ties.repeats(PROMPTS, completions(reports[name]), logprob_requests(state, name))
        repeated[name] = {"counts": greedy_ties.summary(found), "mismatches": found}
    first = state["legs"][state["first_leg"]]
    setup_patch = patch_record("setup")
    doc = {
        "made_by": ("E2E_MODEL=%s E2E_SHARED_GPU_RANKS=%d " % (FAMILY, RANKS) if RANKS else "E2E_MODEL=%s " % FAMILY)
                   + "bash scripts/device/sglang_e2e.sh setup; ... legs (device tool)",
        "mode": "shared-gpu rehearsal" if RANKS else "one rank per GPU",
        "ranks_per_gpu": RANKS or 1,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sglang": versions.get("sglang"), "flashinfer": versions.get("flashinfer-python"),
        "torch": versions.get("torch"), "sglang_kernel": versions.get("sglang-kernel") + " (trimmed for the test bed)"
        if versions.get("sglang-kernel") else None, "transformers": versions.get("transformers"),
        "gpus": gpus(),
        "model": {"family": FAMILY, "architecture": target["architectures"][0], "layers": target["num_hidden_layers"],
                  "hidden_size": target["hidden_size"], "vocab_size": target["vocab_size"],
                  "weights": "random", "decisive": DECISIVE,
                  "draft": {"architecture": draft["architectures"][0], "layers": draft["num_hidden_layers"],
                            "model_type": draft.get("model_type")}},
        # the gates the patch module admitted at setup, and what reverting it (the control leg) did
        "patch_sites": [{k: site.get(k) for k in ("gate", "path", "function", "status")}
                        for site in setup_patch.get("result", {}).get("sites", [])],
        "patch_msg": setup_patch.get("result", {}).get("msg"),
        "fusion_server_args": setup_patch.get("server_args"),
        "fusion_canary": {k: setup_patch.get("canary", {}).get(k) for k in ("passed", "summary")},
        "patch_reverted_for_control": {"msg": patch_record("revert").get("result", {}).get("msg")} if RANKS else None,
        "server_start": {k: first["server"].get(k) for k in ("argv", "user", "cwd", "environment_files",
                                                               "passed_from_host", "added")},
        "steps": state["steps"],
        # FlashInfer's fused all-reduce kernel: carried from an earlier machine (FlashInfer's prebuilt location) or
        # built here by nvcc (the canary's first call), and what loading it as the server reported (E2E_JIT=build)
        "trtllm_comm": dict(state.get("trtllm_comm") or {}, carried=any(
            s["name"] == "unpack_carried_trtllm_comm" for s in state["steps"]), built_here=state.get("trtllm_comm_built")),
        "fusion_log_line": (first.get("fusion_log_lines") or [""])[0],
        "fusion_off_lines": first.get("fusion_off_lines"),
        "fusion_prove_rc": first.get("prove_rc"),
        "fused_kernel_calls": first.get("flashinfer_api_calls"),
        "health_generate_status": first.get("health_generate_status"),
        "ready_after_s": {name: state["legs"][name].get("ready", {}).get("since_start_s") for name in reports},
        "stops": {name: state["legs"][name].get("stopped") for name in reports},
        "tp_size": tp_size(),
        "legs": legs,
        "legs_not_run": not_run,
        "greedy_match": match,
        "greedy_max_new_tokens": GREEDY_TOKENS,
        "greedy_mismatches": explained,
        "greedy_tie_bound": greedy_ties.TIE_BOUND,
        "greedy_repeat": repeated,
        "greedy_gaps": {name: [greedy_ties.gaps(logprob_requests(state, name).get(prompt, {}).get("top_logprobs"))
                               for prompt in PROMPTS] for name in reports},
        "completions": {name: [c.get("output_ids") for c in reports[name]["completions"]] for name in reports},
        # the production gate's comparison (module_utils/bench_gate.py) of the runner's completions with the plain
        # leg's, logprobs and all: where they part, and which partings it takes for ties
        "gate_correctness": {name: gate_correctness(reports["plain"], reports[name]) for name in reports
                             if name != "plain"},
        # every leg ran with an API key through the role's options file: where the key could be read on the first
        # leg, and which answers the real server refused without it (the fixture below has them all)
        "api_key": dict(first.get("api_key") or {}, refused_without_key=sorted(
            "%s %s" % (c["method"], c["path"]) for c in first.get("unauthorized") or []
            if c["auth"] == "none" and c["status"] == 401)),
    }
    logprobs = {"made_by": doc["made_by"], "date": doc["date"], "prompts": PROMPTS,
                "legs": {name: logprob_requests(state, name) for name in reports},
                "gate_completions": {name: reports[name]["completions"] for name in reports}}
    fixture = {"sglang": versions.get("sglang"), "recorded": doc["date"], "responses": first.get("responses"),
               "unauthorized": first.get("unauthorized"),
               "log_lines": first.get("log_lines"), "fusion_log_lines": first.get("fusion_log_lines"),
               "client_result_keys": sorted((reports[state["first_leg"]]["runs"][0]["result"] or {}).keys()),
               "client_module": reports[state["first_leg"]]["client"]["module"]}
    # The key in nothing that is kept: the evidence, the fixture, the gate runner's reports (bench-<leg>.json).
    key = api_key()
    doc["api_key"]["in_evidence_and_gate_reports"] = sum(
        json.dumps(part).count(key) for part in (doc, logprobs, fixture, reports))
    for name, content in ((evidence_name("sglang_e2e"), doc), (evidence_name("sglang_greedy_logprobs"), logprobs),
                          ("sglang_0.5.17_real_server.json", fixture)):
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as handle:
            json.dump(content, handle, indent=1)
    return 0


def main(argv):
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(RECORDS, exist_ok=True)
    state = load_state()
    if argv[0] == "setup":
        return setup(state)
    if argv[0] == "legs":
        for index in [int(a) for a in argv[1:]] or range(len(LEGS)):
            if state["legs"].get(LEGS[index][0], {}).get("bench_rc") == 0 or not runnable(index):
                continue  # measured in an earlier call, or cannot run on this machine
            if run_leg(state, index):
                return 1
        if all(state["legs"].get(LEGS[i][0], {}).get("bench_rc") == 0 for i in range(len(LEGS)) if runnable(i)):
            return evidence(state)
        return 0
    if argv[0] == "evidence":
        return evidence(state)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["--help"]))
