"""Each leg of sglang_e2e.py's run: its server started from the leg's rendered unit, waited for with the role's
readiness check, (first leg) the role's fusion proof, the real answers recorded for the stand-in and what the
API key protects, SGLang's own client from the deployed venv (the role's bench_runner.py), then stopped as
systemd stops it. What a leg finds goes to the run's state for e2e_evidence.py."""
import glob
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # e2e_bed.py beside it, however this is loaded
import e2e_bed as bed  # noqa: E402  pylint: disable=wrong-import-position
import fusion_evidence  # noqa: E402  pylint: disable=wrong-import-position
import start_timeline  # noqa: E402  pylint: disable=wrong-import-position
import journal_excerpt  # noqa: E402  pylint: disable=wrong-import-position
import unit_exec  # noqa: E402  pylint: disable=wrong-import-position


def rehearsal_env():
    """What a rehearsal leg's launcher gets besides the unit's environment (never written into a unit)."""
    env = {"SGLANG_ONE_VISIBLE_DEVICE_PER_PROCESS": "1", "CUDA_VISIBLE_DEVICES": "0,1",
           "PYTHONPATH": os.path.join(bed.REHEARSAL, "hook"), "E2E_SHARED_GPU_RANKS": str(bed.RANKS)}
    env.update(unit_exec.read_env_file(os.path.join(bed.HERE, "shared-gpu-rank.env")))
    return env


def start_leg(state, index):
    name, _unit, _spec, fusion = bed.LEGS[index]
    if bed.control(index) and not state.get("patch_reverted"):
        # the control: the fusion leg's own unit, after the patch module took the patch out (state absent)
        rc = bed.playbook(state, "revert", state["python"], log_name="ansible_revert")
        state["patch_reverted"] = rc == 0
        bed.save_state(state)
        if rc:
            return 1
    taken = http("GET", "/health", authorization=None)[0]
    if taken is not None:  # another server answers there: its answers would be taken for this leg's
        print("port %d already answers (%s): a server of an earlier leg or job still runs; not starting %s"
              % (bed.PORT, taken, name), flush=True)
        return 1
    log_path = "/var/log/sglang-e2e-%s-%s.log" % (bed.RUN, name)
    if os.path.exists(log_path):
        os.unlink(log_path)
    # FlashInfer's API log counts the fused kernel's calls: on in every leg of a rehearsal (0 is evidence too)
    extra = {"FLASHINFER_LOGLEVEL": "1", "FLASHINFER_LOGDEST": bed.API_LOG} if fusion or bed.RANKS else {}
    extra.update(rehearsal_env() if bed.RANKS else {})
    for old in glob.glob(bed.API_LOG.replace("%i", "*")):
        os.unlink(old)
    caches = cache_roots(index)
    bed.save_json(bed.CACHE_SNAPSHOT, start_timeline.snapshot(caches))
    started = unit_exec.start(bed.unit_path(index), log_path, extra, bed.REHEARSAL_ARGS if bed.RANKS else ())
    started["started_at"] = time.time()
    # the first server start on this machine finds the compile caches empty (what a host's first start after an
    # install does): it gets the long wait, and what it compiled is measured
    started["first_on_machine"] = not os.path.exists(bed.STARTED_ONCE)
    started["cache_roots"] = caches
    with open(bed.STARTED_ONCE, "a", encoding="utf-8") as handle:
        handle.write("%s %s\n" % (bed.RUN, name))
    state["legs"].setdefault(name, {})["server"] = started
    bed.save_state(state)
    print("started %s: pid %d" % (name, started["pid"]), flush=True)
    return 0


def cache_roots(index):
    """The folders a start compiles into: the service user's home (Triton's ~/.triton, FlashInfer's workspace,
    ~/.cache) and torch's inductor folder in /tmp."""
    _unit, _passed, popen = unit_exec.as_service(bed.unit_path(index))
    home = popen["env"].get("HOME") or "/var/lib/sglang"
    return [home] + sorted(glob.glob("/tmp/torchinductor_*"))


def start_record(server):
    """Where this start's time went: SGLang's start-up phases from its log and the caches it wrote meanwhile."""
    with open(server["log"], encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    with open(bed.CACHE_SNAPSHOT, encoding="utf-8") as handle:
        before = json.load(handle)
    after = start_timeline.snapshot(server.get("cache_roots") or [])
    return {"first_on_machine": server.get("first_on_machine"), "phases": start_timeline.phases(lines),
            "markers": start_timeline.markers(lines),
            "cache_growth": start_timeline.growth(before, after, server["started_at"])}


def http(method, path, body=None, timeout=60, authorization=""):
    """(status, content type, text) of one request; AUTHORIZATION: the header (None: none; default: the key's)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    if authorization is not None:
        headers["Authorization"] = authorization or "Bearer " + bed.api_key()
    request = urllib.request.Request(bed.BASE_URL + path, data=data, method=method, headers=headers)
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
             ("POST", "/generate", {"text": bed.PROMPTS[0],
                                    "sampling_params": {"temperature": 0, "max_new_tokens": 8}}),
             ("POST", "/generate", {"text": bed.PROMPTS[0], "sampling_params": {"temperature": 0, "max_new_tokens": 8},
                                    "return_logprob": True, "top_logprobs_num": 2}),  # as the gate's runner asks
             ("POST", "/v1/completions", {"model": "default", "prompt": bed.PROMPTS[0], "max_tokens": 8,
                                          "temperature": 0}),
             ("POST", "/v1/chat/completions", {"model": "default", "max_tokens": 8, "temperature": 0,
                                               "messages": [{"role": "user", "content": bed.PROMPTS[0]}]}),
             ("GET", "/metrics", None), ("POST", "/flush_cache", None), ("GET", "/no_such_path", None)]
    return [recorded(method, path, body) for method, path, body in calls]


def recorded(method, path, body, authorization=""):
    """One request and the real answer as kept: status, content type, body (JSON parsed), the key taken out."""
    status, ctype, text = http(method, path, body, authorization=authorization)
    text = bed.redacted(text)
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    return {"method": method, "path": path, "request": body, "status": status, "content_type": ctype,
            "json": parsed, "text": None if parsed is not None else text[:TEXT_KEPT.get(path, 2000)]}


def record_unauthorized():
    """The real server's answers without the key, with a wrong one, and with the scheme in lower case: what the
    API key protects (the stand-in imitates utils/auth.py)."""
    generate = {"text": bed.PROMPTS[0], "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
    completion = {"model": "default", "prompt": bed.PROMPTS[0], "max_tokens": 8, "temperature": 0}
    calls = [("GET", "/health", None), ("GET", "/health_generate", None), ("GET", "/metrics", None),
             ("GET", "/ready", None), ("GET", "/server_info", None), ("GET", "/get_server_info", None),
             ("GET", "/model_info", None), ("GET", "/v1/models", None), ("POST", "/generate", generate),
             ("POST", "/v1/completions", completion), ("POST", "/flush_cache", None), ("GET", "/no_such_path", None)]
    out = []
    for auth, header in (("none", None), ("wrong", "Bearer not-the-key"),
                         ("lowercase_scheme", "bearer " + bed.api_key())):
        for method, path, body in calls if auth == "none" else calls[7:9]:
            out.append(dict(recorded(method, path, body, authorization=header), auth=auth))
    return out


def key_exposure(log_path):
    """Where the real server's key can be read: its log (SGLang logs server_args), the role's redacted excerpt of
    it, and every process's arguments and environment (the key must reach neither)."""
    key = bed.api_key()
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
    for path in glob.glob(bed.API_LOG.replace("%i", "*")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines += handle.read().splitlines()
    return fusion_evidence.api_call_counts(lines)


def greedy_logprobs():
    """Each prompt's greedy output with the server's top-2 logprobs per position, asked apart from the benchmark
    client's completions (which stay what the legs are compared on): where two legs part, these say whether the two
    tokens were tied (greedy_ties.py)."""
    out = {}
    for prompt in bed.PROMPTS:
        status, _ctype, text = http("POST", "/generate", {
            "text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": bed.GREEDY_TOKENS},
            "return_logprob": True, "top_logprobs_num": 2})
        try:
            reply = json.loads(text)
            out[prompt] = {"status": status, "output_ids": reply.get("output_ids"),
                           "top_logprobs": reply["meta_info"].get("output_top_logprobs")}
        except (ValueError, KeyError, TypeError, AttributeError):
            out[prompt] = {"status": status, "error": (text or "")[:500]}
    return out


def bench(state, name, python_client):
    settings = {"base_url": bed.BASE_URL, "tokenizer": bed.MODELS + "/target", "input_len": 128, "output_len": 64,
                # a rehearsal's throughput is time-slicing of one GPU: one run is enough to prove the client runs
                "num_prompts": 16, "seed": 1, "repeats": 1 if bed.RANKS else 3, "warmup_requests": 2,
                "concurrencies": [1],
                "run_timeout_s": 150, "request_timeout_s": 60, "correctness": True, "prompts": bed.PROMPTS,
                "correctness_max_new_tokens": bed.GREEDY_TOKENS, "extra_client_args": [], "api_key_file": bed.KEY_FILE}
    path = os.path.join(bed.STATE_DIR, "bench-%s-%s.json" % (bed.RUN, name))
    started = time.monotonic()
    with open(path, "wb") as handle:
        proc = subprocess.run([python_client, os.path.join(bed.REPO, "roles/sglang_benchmark/files/bench_runner.py"),
                               json.dumps(settings)], stdout=handle, stderr=subprocess.PIPE, timeout=540,
                              check=False, env=dict(os.environ, **unit_exec.MULTICAST_OFF))
    state["steps"].append({"name": "bench_" + name, "rc": proc.returncode,
                           "seconds": round(time.monotonic() - started, 1)})
    shutil.copy(path, os.path.join(bed.OUT, "bench-%s.json" % name))
    if proc.returncode:
        with open(os.path.join(bed.OUT, "bench-%s.err" % name), "wb") as handle:
            handle.write(proc.stderr[-20000:])
    return proc.returncode


def run_leg(state, index):
    name, unit, spec, fusion = bed.LEGS[index]
    leg = state["legs"].setdefault(name, {})
    server = leg.get("server")
    if not server or unit_exec.process_gone(server["pid"]):
        if start_leg(state, index):
            return 1
        server = leg["server"]
    started = time.monotonic()
    wait_s = bed.FIRST_READY_S if server.get("first_on_machine") else bed.READY_S
    proc = subprocess.run(["/usr/bin/env", "python3", os.path.join(bed.REPO, "roles/sglang_server/files/wait_ready.py"),
                           "--url", bed.BASE_URL + "/health_generate", "--pid", str(server["pid"]),
                           "--timeout", str(wait_s), "--poll", "3", "--key-file", bed.KEY_FILE],
                          capture_output=True, text=True, check=False)
    leg["ready"] = json.loads(proc.stdout or "{}")
    leg["ready"].update(since_start_s=round(time.time() - server["started_at"], 1), wait_s=wait_s)
    leg["start"] = start_record(server)
    state["steps"].append({"name": "wait_ready_" + name, "rc": proc.returncode,
                           "seconds": round(time.monotonic() - started, 1)})
    bed.save_state(state)
    shutil.copy(server["log"], os.path.join(bed.OUT, "server-%s.log" % name))
    if proc.returncode:  # never ready: stopped, so that the port is free for whatever runs next
        leg["stopped"] = unit_exec.stop(server["pid"], grace_s=server["timeout_stop_s"])
        bed.save_state(state)
        return 1
    leg["health_generate_status"] = http("GET", "/health_generate")[0]
    first = index == next(i for i in range(len(bed.LEGS)) if bed.runnable(i))  # the first leg that runs here
    if first or bed.RANKS:  # the role's proof, on every leg of a rehearsal
        proof_log = "ansible_prove_%s" % name
        rc = bed.playbook(state, "prove", state["python"], {
            "e2e_log_file": server["log"], "e2e_prove_unit": bed.UNITS.index(unit),
            "e2e_api_log": bed.API_LOG if fusion or bed.RANKS else ""}, log_name=proof_log)
        with open(os.path.join(bed.OUT, proof_log + ".log"), encoding="utf-8", errors="replace") as handle:
            leg["proof"], leg["proof_message"] = fusion_evidence.proof_outcome(rc, bed.redacted(handle.read()))
        leg["prove_rc"] = rc
    with open(server["log"], encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    leg["fusion_log_lines"] = [bed.redacted(l) for l in lines if any(key in l for key in fusion_evidence.FUSION_ON)]
    leg["fusion_off_lines"] = [bed.redacted(l) for l in lines if any(key in l for key in fusion_evidence.FUSION_OFF)]
    if first:
        state["first_leg"] = name
        leg["responses"] = record_responses()
        leg["unauthorized"] = record_unauthorized()
        leg["api_key"] = key_exposure(server["log"])
        leg["log_lines"] = [bed.redacted(l) for l in lines if any(key in l for key in (
            "fired up and ready to roll", "Uvicorn running on", "Load weight end", "Capture", "max_total_num_tokens",
            "server_args=", "Started server process", "Application startup complete", "FlashInfer", "EAGLE",
            "deprecated"))][:80]
    client = "/opt/sglang/current/bin/python"
    leg["bench_rc"] = bench(state, name, client)
    leg["greedy_logprobs"] = greedy_logprobs()
    if fusion or bed.RANKS:
        leg["flashinfer_api_calls"] = api_log_counts()
        for path in glob.glob(bed.API_LOG.replace("%i", "*"))[:2]:  # the first lines only: the log grows per call
            with open(path, "rb") as source, open(os.path.join(bed.OUT, "%s-%s" % (name, os.path.basename(path))),
                                                  "wb") as copy:
                copy.write(source.read(200000))
    # as systemd stops the unit: TERM to the group, KILL after the unit's TimeoutStopSec
    leg["stopped"] = dict(unit_exec.stop(server["pid"], grace_s=server["timeout_stop_s"]),
                          timeout_stop_s=server["timeout_stop_s"])
    shutil.copy(server["log"], os.path.join(bed.OUT, "server-%s.log" % name))
    bed.save_state(state)
    return 0
