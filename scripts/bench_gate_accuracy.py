#!/usr/bin/env python3
"""How well the benchmark gate measures: SGLang's real client (through the role's bench_runner.py) against the
SGLang STAND-IN server (lab/standins/) whose true speed is set, on this machine.

1. Accuracy: measured single-stream output tok/s vs the stand-in's true rate, from 20 to 2000 tok/s (error %).
2. False-fail rate under +-5 % noise: many runs of a stand-in whose per-request speed is drawn within +-5 %; every
   3-run combination is one gate decision (median of 3, the role's default repeats) against a bar set a given
   headroom below the true rate; the share of decisions that fail is the false-fail rate at that headroom.

    .cache/sglang-bench-client/bin/python scripts/bench_gate_accuracy.py [--noise-runs 20]
(scripts/bench-client.sh makes that venv.) Prints a table; --json FILE keeps the raw numbers.
"""
import argparse
import itertools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STANDIN = os.path.join(REPO, "lab", "standins", "sglang_server_standin.py")
RUNNER = os.path.join(REPO, "roles", "sglang_benchmark", "files", "bench_runner.py")
MODEL = os.path.join(REPO, "lab", "models", "kimi-k2.5-standin")
DRAFT = os.path.join(REPO, "lab", "models", "kimi-k2.5-eagle3-standin")
SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", DRAFT]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_standin(tmp, config):
    port = free_port()
    path = os.path.join(tmp, "config.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(dict({"startup_delay_s": 0, "health_check_s": 0, "access_log": False}, **config), handle)
    log = open(os.path.join(tmp, "standin.log"), "wb")  # pylint: disable=consider-using-with
    proc = subprocess.Popen([sys.executable, STANDIN, "--model-path", MODEL, "--port", str(port)] + SPEC,
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, SGLANG_STANDIN_CONFIG=path))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=2) as response:
                if response.status == 200:
                    return proc, port
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the stand-in did not become healthy: see %s" % log.name)


def measure(config, output_len, num_prompts, repeats):
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_standin(tmp, config)
        try:
            settings = {"base_url": "http://127.0.0.1:%d" % port, "tokenizer": MODEL, "input_len": 16,
                        "output_len": output_len, "num_prompts": num_prompts, "seed": 1, "repeats": repeats,
                        "warmup_requests": 1, "concurrencies": [1], "correctness": False, "prompts": [],
                        "correctness_max_new_tokens": 1, "request_timeout_s": 120, "run_timeout_s": 600}
            out = subprocess.run([sys.executable, RUNNER, json.dumps(settings)], stdout=subprocess.PIPE, check=True)
        finally:
            proc.terminate()
            proc.wait(10)
    runs = json.loads(out.stdout)["runs"]
    bad = [r for r in runs if not r["result"] or r["result"]["completed"] != num_prompts]
    if bad:
        raise SystemExit("incomplete run: %s" % bad[0].get("error"))
    return [r["result"]["output_throughput"] for r in runs]


def accuracy(rates):
    rows = []
    for rate in rates:
        output_len = int(min(1024, max(64, rate * 2)))  # ~2 s of decoding per request
        measured = measure({"tokens_per_s": rate, "accept_length": 2.0}, output_len, 2, 1)[0]
        rows.append({"true_tok_s": rate, "measured_tok_s": measured, "error_pct": 100.0 * (measured - rate) / rate,
                     "output_len": output_len})
        print("  %7.0f tok/s true  %9.1f measured  %+6.1f %%  (output_len %d)"
              % (rate, measured, rows[-1]["error_pct"], output_len), flush=True)
    return rows


def false_fail(runs, headrooms, repeats=3):
    """Share of repeats-run medians below a bar that lies `headroom` % below the runs' overall median."""
    center = statistics.median(runs)
    decisions = [statistics.median(c) for c in itertools.combinations(runs, repeats)]
    out = []
    for headroom in headrooms:
        bar = center / (1.0 + headroom / 100.0)
        failed = sum(1 for d in decisions if d < bar)
        out.append({"headroom_pct": headroom, "decisions": len(decisions), "false_fails": failed,
                    "false_fail_pct": 100.0 * failed / len(decisions)})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="20,50,100,200,500,1000,2000")
    parser.add_argument("--noise-runs", type=int, default=20)
    parser.add_argument("--noise-rate", type=float, default=130.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    print("1. measured vs true single-stream rate (1 run of 2 requests each, accept length 2.0):", flush=True)
    rows = accuracy([float(r) for r in args.rates.split(",")])
    print("   max |error| %.1f %%" % max(abs(r["error_pct"]) for r in rows))
    print("2. false-fail rate, stand-in at %.0f tok/s with +-5 %% per-request noise, %d runs of 4 requests:"
          % (args.noise_rate, args.noise_runs), flush=True)
    runs = []
    for seed in range(args.noise_runs):
        runs += measure({"tokens_per_s": args.noise_rate, "noise_pct": 5, "seed": seed}, 128, 4, 1)
    spread = 100.0 * (max(runs) - min(runs)) / statistics.median(runs)
    print("   run-to-run: median %.1f tok/s, min %.1f, max %.1f (spread %.1f %%), stdev %.2f %%"
          % (statistics.median(runs), min(runs), max(runs), spread,
             100.0 * statistics.stdev(runs) / statistics.mean(runs)))
    table = false_fail(runs, [0.0, 1.0, 2.0, 3.0, 5.0])
    for row in table:
        print("   true rate %4.1f %% above the bar: %5.1f %% of %d median-of-3 gate decisions fail"
              % (row["headroom_pct"], row["false_fail_pct"], row["decisions"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"accuracy": rows, "noise_runs": runs, "false_fail": table}, handle, indent=1)


if __name__ == "__main__":
    main()
