#!/usr/bin/env python3
"""Measures one SGLang server with SGLang's own benchmark client and prints everything as one JSON object.

Run by the benchmark client's Python (the deployed venv on a GPU host, or a client venv): it needs the `sglang`
package that holds the client, nothing else of ours (stdlib only). Steps:
  1. greedy completions of a fixed prompt set over POST /generate (temperature 0), with each position's top-2
     logprobs: the correctness sample;
  2. warm-up requests of the measured length (discarded);
  3. N repeats per concurrency of `python -m sglang.benchmark.serving` (or `sglang.bench_serving` on releases
     before 0.5.15.post1) on the offline `random-ids` dataset with the local tokenizer, fixed lengths, explicit
     seed; each run's JSON result line is read from its own --output-file (the client appends).
     All runs of one measurement execute the client's own `__main__` in one child process, one after the other
     (runpy, as `python -m` does), so its import of torch is paid once per measurement, not once per run; with
     settings "warm_client" (the controller's client) that child is forked from a process that imported the
     client already (warm_client.py), so the import is paid once per warm period, not once per measurement.
The gate itself (which runs count, the verdict) is on the controller: module_utils/bench_gate.py.

    bench_runner.py SETTINGS_JSON        (the settings themselves, or a file holding them)
    bench_runner.py --client-runs FILE   (internal: the child that runs the client for each run in FILE)
    bench_runner.py --warm-client MODULE IDLE_S SOCKET
                                         (internal: the warm client, warm_client.py; settings "warm_client":
                                          {"dir": D, "idle_s": N} use it, on the controller)
"""
import contextlib
import importlib.util
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

CLIENT_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")


def module_source(name):
    """NAME's source file, found without importing the package that holds it (sglang's imports torch); None when
    there is none."""
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])
    if spec is None:
        return None
    if len(parts) == 1:
        path = spec.origin
    else:
        path = os.path.join(list(spec.submodule_search_locations or [""])[0], *parts[1:]) + ".py"
    return path if path and os.path.exists(path) else None


def client_module():
    """The client module the installed sglang has, found without importing sglang (that imports torch)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bench_runner: no sglang package in %s: the benchmark client venv must hold it"
                         % sys.executable)
    for name in CLIENT_MODULES:
        if module_source(name):
            return name
    raise SystemExit("bench_runner: sglang in %s has neither %s"
                     % (list(spec.submodule_search_locations)[0], " nor ".join(CLIENT_MODULES)))


def sglang_version():
    try:
        from importlib import metadata  # pylint: disable=import-outside-toplevel
        return metadata.version("sglang")
    except Exception:  # pylint: disable=broad-except
        return None


def _headers(api_key):
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    return headers


def generate(base_url, api_key, prompt, max_new_tokens, timeout, top_n=0):
    body = {"text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens}}
    if top_n:
        body.update(return_logprob=True, top_logprobs_num=top_n)
    request = urllib.request.Request(base_url + "/generate", data=json.dumps(body).encode(), headers=_headers(api_key))
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode())


def top_logprobs(rows):
    """[[token id, logprob], ...] per output position from SGLang's meta_info.output_top_logprobs ([logprob, id,
    text] entries): the form the gate records and reads (module_utils/bench_gate.py top_at), made here only; None
    where the server sent none."""
    if not isinstance(rows, list):
        return None
    return [[[entry[1], entry[0]] for entry in row if isinstance(entry, list) and len(entry) >= 2]
            if isinstance(row, list) else None for row in rows]


def completions(settings, api_key):
    """Each prompt's greedy completion with its top-2 logprobs per position, which tell the gate where two
    completions part at a tie (module_utils/bench_gate.py tie_at). A server that refuses logprobs (HTTP 4xx other than
    401/403: some speculative algorithms do) is asked again without them, and the completion says so."""
    out = []
    for prompt in settings["prompts"]:
        args = (settings["base_url"], api_key, prompt, settings["correctness_max_new_tokens"],
                settings["request_timeout_s"])
        refused = None
        try:
            try:
                reply = generate(*args, top_n=2)
            except urllib.error.HTTPError as exc:
                if not 400 <= exc.code < 500 or exc.code in (401, 403):
                    raise  # a refused key is refused without logprobs too: recorded once, as the error it is
                refused = "HTTP %d" % exc.code
                reply = generate(*args)
            record = {"prompt": prompt, "text": reply.get("text"), "output_ids": reply.get("output_ids"),
                      "top_logprobs": top_logprobs((reply.get("meta_info") or {}).get("output_top_logprobs"))}
            if refused:
                record["logprobs_refused"] = refused
            out.append(record)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            out.append({"prompt": prompt, "error": str(exc)})
    return out


def warm_up(settings, api_key):
    for index in range(settings["warmup_requests"]):
        try:
            generate(settings["base_url"], api_key, "Warm-up request %d." % index, settings["output_len"],
                     settings["request_timeout_s"])
        except (urllib.error.URLError, OSError, ValueError):
            pass  # the measured runs report failures; a warm-up only has to have been tried


def client_argv(settings, concurrency, output):
    """The client's command line for one run (after `python -m MODULE`)."""
    return ["--backend", "sglang", "--base-url", settings["base_url"],
            "--dataset-name", "random-ids", "--tokenizer", settings["tokenizer"],
            "--random-input-len", str(settings["input_len"]), "--random-output-len", str(settings["output_len"]),
            "--random-range-ratio", "1.0", "--num-prompts", str(settings["num_prompts"]),
            "--max-concurrency", str(concurrency), "--seed", str(settings["seed"]),
            "--output-file", output, "--disable-tqdm"] + list(settings.get("extra_client_args") or [])


def client_runs(path):
    """Child: run the client module's __main__ once per run listed in PATH, each with its own log and status."""
    with open(path, encoding="utf-8") as handle:
        plan = json.load(handle)
    for run in plan["runs"]:
        started, rc = time.time(), 0
        with open(run["log"], "w", encoding="utf-8") as log, contextlib.redirect_stdout(log), \
                contextlib.redirect_stderr(log):
            sys.argv = [plan["module"]] + run["argv"]
            try:
                runpy.run_module(plan["module"], run_name="__main__", alter_sys=True)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, (int, type(None))):
                    print(exc.code)
            except BaseException as exc:  # pylint: disable=broad-except  # one run's crash is that run's error
                import traceback  # pylint: disable=import-outside-toplevel
                traceback.print_exc()
                rc = 1
                if isinstance(exc, KeyboardInterrupt):
                    raise
        with open(run["status"], "w", encoding="utf-8") as handle:
            json.dump({"rc": rc, "wall_s": round(time.time() - started, 3)}, handle)


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def run_record(concurrency, repeat, output, log, status):
    """One run as the gate reads it: the client's result line, or why there is none."""
    state = json.loads(_read(status) or "null") or {"rc": None, "wall_s": None}
    rc, text = state["rc"], _read(log)
    run = {"concurrency": concurrency, "repeat": repeat, "rc": rc, "wall_s": state["wall_s"],
           "result": None, "error": None}
    lines = [line for line in _read(output).splitlines() if line.strip()]
    if lines:
        try:
            result = json.loads(lines[-1])
            result.pop("server_info", None)  # the whole server args, every run: read once below instead
            run["result"] = {k: v for k, v in result.items() if not isinstance(v, list)}
        except ValueError as exc:
            run["error"] = "unreadable result line: %s" % exc
    if rc is None:
        run["error"] = "the client did not finish this run: %s" % (state.get("why") or "the child process ended")
    elif rc != 0:
        run["error"] = "client exit code %s: %s" % (rc, text.strip().splitlines()[-1:] or "")
    if run["result"] is None and not run["error"]:
        run["error"] = "the client wrote no result line"
    run["log_tail"] = text[-2000:]
    return run


def measure_runs(settings, module, workdir, env, client=None):
    """Every run of the measurement in one child process; the records in order. CLIENT (a dict) is told how the
    client ran: in the warm client (warm_client.py) when the settings ask for it and it can, else in a process of
    its own."""
    runs = []
    for concurrency in settings["concurrencies"]:
        for repeat in range(1, settings["repeats"] + 1):
            stem = os.path.join(workdir, "run-c%d-r%d" % (concurrency, repeat))
            runs.append({"concurrency": concurrency, "repeat": repeat, "output": stem + ".jsonl",
                         "log": stem + ".log", "status": stem + ".status.json",
                         "argv": client_argv(settings, concurrency, stem + ".jsonl")})
    plan = os.path.join(workdir, "plan.json")
    with open(plan, "w", encoding="utf-8") as handle:
        json.dump({"module": module, "runs": runs}, handle)
    timeout = settings["run_timeout_s"] * max(len(runs), 1)
    outcome, how = run_plan(settings, module, plan, env, timeout)
    if client is not None:
        client["ran_in"] = how
    if outcome == "timed out":
        for run in runs:
            if not os.path.exists(run["status"]):
                with open(run["status"], "w", encoding="utf-8") as handle:
                    json.dump({"rc": None, "wall_s": None, "why": "timed out after %ss" % timeout}, handle)
    return [run_record(r["concurrency"], r["repeat"], r["output"], r["log"], r["status"]) for r in runs]


def _warm_client():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_client.py")
    spec = importlib.util.spec_from_file_location("warm_client", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_plan(settings, module, plan, env, timeout):
    """Runs the plan's client runs: ('done' | 'timed out' | 'ended', where they ran)."""
    warm = settings.get("warm_client") or {}
    how = "a process of its own"
    if warm.get("dir") and int(warm.get("idle_s") or 0) > 0:
        try:
            warm_client = _warm_client()
        except (OSError, ImportError) as exc:
            how += " (no warm client here: %s)" % exc
        else:
            spawn = [sys.executable, os.path.abspath(__file__), "--warm-client", module, str(int(warm["idle_s"]))]
            # What the warm process imported must be what this measurement would import: another Python, client
            # release, client file or runner gets a warm process of its own.
            identity = [sys.executable, module, str(sglang_version())]
            source = module_source(module)
            code = [os.path.abspath(__file__), warm_client.__file__] + ([source] if source else [])
            try:
                path = warm_client.socket_path(warm["dir"], identity, env, code)
                return warm_client.run(path, spawn, plan, env, timeout), "the warm client"
            except warm_client.Unavailable as exc:
                how += " (the warm client could not run it: %s)" % exc
    try:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--client-runs", plan], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timed out", how
    return "done", how


def server_info(base_url, api_key, timeout):
    for path in ("/server_info", "/get_server_info"):
        try:
            request = urllib.request.Request(base_url + path, headers=_headers(api_key))
            with urllib.request.urlopen(request, timeout=timeout) as response:
                info = json.loads(response.read().decode())
            keep = ("version", "tp_size", "speculative_algorithm", "speculative_num_steps",
                    "speculative_num_draft_tokens", "flashinfer_allreduce_fusion_backend", "model_path",
                    "served_model_name")
            return {k: info.get(k) for k in keep}
        except (urllib.error.URLError, OSError, ValueError):
            continue
    return {}


def main(arg):
    if arg.lstrip().startswith("{"):
        settings = json.loads(arg)
    else:
        with open(arg, encoding="utf-8") as handle:
            settings = json.load(handle)
    api_key = None
    if settings.get("api_key_file"):
        with open(settings["api_key_file"], encoding="utf-8") as handle:
            api_key = handle.read().strip()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.pop("API_KEY", None)
    if api_key:
        env["OPENAI_API_KEY"] = api_key  # what the client sends as a Bearer token
    module = client_module()
    report = {"client": {"python": sys.executable, "module": module, "sglang": sglang_version()},
              "settings": {k: v for k, v in settings.items() if k != "api_key_file"},
              "server": server_info(settings["base_url"], api_key, settings["request_timeout_s"]),
              "completions": completions(settings, api_key) if settings.get("correctness") else [],
              "runs": []}
    warm_up(settings, api_key)
    with tempfile.TemporaryDirectory(prefix="sglang-bench-") as workdir:
        report["runs"] = measure_runs(settings, module, workdir, env, report["client"])
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--client-runs":
        client_runs(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "--warm-client":
        _warm_client().serve(sys.argv[4], sys.argv[2], float(sys.argv[3]), client_runs)
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        raise SystemExit(__doc__)
