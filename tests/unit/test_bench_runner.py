"""bench_runner.py runs every client run of a measurement in one child process (the client's own __main__ through
runpy, so torch is imported once): each run keeps its own result, exit code and log, and one run's crash or exit is
that run's error, not the measurement's."""
import os

from tests.helpers.script_module import load_file

bench_runner = load_file("roles/sglang_benchmark/files/bench_runner.py", "bench_runner")

# A client stand-in that behaves by the run's --seed: 1 writes a result, 2 raises, 3 exits 3, 4 hangs.
FAKE_CLIENT = '''
import json, sys, time
argv = sys.argv[1:]
seed = int(argv[argv.index("--seed") + 1])
out = argv[argv.index("--output-file") + 1]
print("fake client run, seed", seed)
IMPORTS = sys.modules.setdefault("fake_client_imports", type(sys)("fake_client_imports"))
IMPORTS.count = getattr(IMPORTS, "count", 0) + 1
if seed == 1:
    with open(out, "a") as handle:
        handle.write(json.dumps({"completed": 2, "output_throughput": 99.5, "imports_seen": IMPORTS.count,
                                 "itl": [1, 2]}) + "\\n")
elif seed == 2:
    raise RuntimeError("boom in the client")
elif seed == 3:
    sys.exit(3)
else:
    time.sleep(60)
'''


def settings(seed, repeats=2, timeout=60):
    return {"base_url": "http://127.0.0.1:9", "tokenizer": "/nonexistent", "input_len": 4, "output_len": 4,
            "num_prompts": 2, "seed": seed, "repeats": repeats, "concurrencies": [1], "run_timeout_s": timeout}


def measure(tmp_path, seed, **kwargs):
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "fake_client.py").write_text(FAKE_CLIENT)
    work = tmp_path / ("work-%d" % seed)
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkg"))
    return bench_runner.measure_runs(settings(seed, **kwargs), "fake_client", str(work), env)


def test_every_run_of_a_measurement_shares_one_process(tmp_path):
    runs = measure(tmp_path, 1, repeats=3)
    assert [r["rc"] for r in runs] == [0, 0, 0] and [r["error"] for r in runs] == [None, None, None]
    # the module body runs once per run (as python -m would), but the process and its imports are kept
    assert [r["result"]["imports_seen"] for r in runs] == [1, 2, 3]
    assert runs[0]["result"]["output_throughput"] == 99.5 and "itl" not in runs[0]["result"]
    assert "fake client run, seed 1" in runs[0]["log_tail"]


def test_a_crash_or_an_exit_is_that_runs_error(tmp_path):
    crashed = measure(tmp_path, 2)
    assert [r["rc"] for r in crashed] == [1, 1]
    assert "boom in the client" in crashed[0]["error"] and "Traceback" in crashed[0]["log_tail"]
    exited = measure(tmp_path, 3)
    assert [r["rc"] for r in exited] == [3, 3] and exited[1]["error"].startswith("client exit code 3")


def test_a_hung_client_is_stopped_and_its_runs_say_so(tmp_path):
    runs = measure(tmp_path, 4, repeats=2, timeout=1)
    assert [r["rc"] for r in runs] == [None, None]
    assert all("timed out after 2s" in r["error"] for r in runs), runs


def test_the_client_command_line_is_the_documented_one():
    argv = bench_runner.client_argv(dict(settings(7), extra_client_args=["--foo"]), 4, "/tmp/out.jsonl")
    assert argv[:2] == ["--backend", "sglang"] and argv[-1] == "--foo"
    assert argv[argv.index("--max-concurrency") + 1] == "4" and argv[argv.index("--seed") + 1] == "7"
