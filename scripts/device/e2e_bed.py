"""The settings and bookkeeping that sglang_e2e.py's phases share (e2e_legs.py, e2e_evidence.py): the run's model,
draft and mode (E2E_MODEL, E2E_DRAFT, E2E_SHARED_GPU_RANKS), where its state, records and outputs go, the legs
and the prompts, a step's log and record, the playbook's call and the throwaway API key (greedy_margins.py reads
the prompts here too). Importing it puts the project's helpers on the path (module_utils, the server role's files)."""
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(REPO, "module_utils"))  # the gate's own arithmetic (stdlib only), on real answers
sys.path.insert(2, os.path.join(REPO, "roles", "sglang_server", "files"))  # the role's journal redaction
import project_utils  # noqa: E402  pylint: disable=wrong-import-position
project_utils.importable()
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
# Readiness: the first server start on a machine fills the compile caches (measured: start_timeline.py), later ones
# find them full. Both waits are the test bed's; the roles' own rule is sglang_server's (docs/server.md, "The first
# start after an install").
FIRST_READY_S = int(os.environ.get("E2E_FIRST_READY_S") or 1500)
READY_S = int(os.environ.get("E2E_READY_S") or 420)
STARTED_ONCE = os.path.join(STATE_DIR, "servers-started")  # one line per server start on this machine
CACHE_SNAPSHOT = os.path.join(STATE_DIR, "caches-before-start.json")


def gpu_count():
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(line.startswith("GPU ") for line in out.splitlines())


def tp_size():
    """The ranks the roles deploy for: a rehearsal's, or one per GPU."""
    return RANKS or gpu_count()


def runnable(index):
    """Fusion needs tensor parallelism: on a one-GPU machine (no rehearsal) the fusion legs cannot run."""
    return not LEGS[index][3] or tp_size() > 1


def load_state():
    if os.path.exists(STATE):
        with open(STATE, encoding="utf-8") as handle:
            return json.load(handle)
    return {"steps": [], "legs": {}}


def save_json(path, content, indent=None):
    with open(path + ".new", "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=indent)
    os.replace(path + ".new", path)


def save_state(state):
    os.makedirs(STATE_DIR, exist_ok=True)
    save_json(STATE, state, indent=1)
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
            "bash", os.path.join(REHEARSAL, "shared_gpu_rank.sh"), venv_python,
            "/usr/local/lib/sglang-allreduce/allreduce_canary.py"]


def api_key():
    with open(KEY_FILE, encoding="utf-8") as handle:
        return handle.read().strip()


def redacted(text):
    """TEXT with the key taken out by the role's own redaction (journal_excerpt.py), for what is recorded."""
    return journal_excerpt.redact(text, [api_key()])


def unit_path(index=0):
    return "/etc/systemd/system/%s.service" % LEGS[index][1]


def control(index):
    return LEGS[index][0] == "control"
