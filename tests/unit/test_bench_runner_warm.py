"""bench_runner.py's warm client (warm_client.py): measurements on the controller fork from one process that imported
the client already, take the caller's environment (the API key reaches the client, never the warm process), are
stopped on time, and fall back to a process of their own, saying why, whenever the warm path cannot run them."""
import contextlib
import json
import os
import signal
import socket
import threading
import time

import pytest

from tests.helpers.script_module import load_file

bench_runner = load_file("roles/sglang_benchmark/files/bench_runner.py", "bench_runner_warm_test")

# A client stand-in. Importing it (the warm process does) records the importing process; a run reports that
# process, its own, the API key it sees, and behaves by --seed: 1 writes a result, 4 hangs. WARM_FAKE_IMPORT_FAILS
# makes any import but `python -m`'s fail.
FAKE_CLIENT = '''
import json, os, sys, time
if __name__ != "__main__" and os.environ.get("WARM_FAKE_IMPORT_FAILS"):
    raise ImportError("this client cannot be imported ahead")
STATE = sys.modules.setdefault("warm_fake_state", type(sys)("warm_fake_state"))
STATE.imported_in = getattr(STATE, "imported_in", os.getpid())
if __name__ == "__main__":
    argv = sys.argv[1:]
    seed = int(argv[argv.index("--seed") + 1])
    if seed == 4:
        time.sleep(60)
    with open(argv[argv.index("--output-file") + 1], "a") as handle:
        handle.write(json.dumps({"completed": 2, "output_throughput": 99.5, "imported_in": STATE.imported_in,
                                 "ran_in": os.getpid(), "key": os.environ.get("OPENAI_API_KEY")}) + "\\n")
'''


@pytest.fixture(name="lab")
def fixture_lab(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "warm_fake.py").write_text(FAKE_CLIENT)
    (tmp_path / "venv").mkdir()
    yield tmp_path
    for pid in warm_pids(tmp_path, children=True):  # a test that failed half-way leaves none behind
        os.kill(pid, signal.SIGKILL)


def warm_pids(tmp_path, children=False):
    """The warm processes serving TMP_PATH (with CHILDREN: their measurements' children too, which share the
    command line)."""
    parents = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                cmdline = handle.read().split(b"\0")
            with open("/proc/%s/stat" % entry, encoding="utf-8") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"--warm-client" in cmdline and any(str(tmp_path).encode() in part for part in cmdline):
            parents[int(entry)] = parent
    return sorted(pid for pid, parent in parents.items() if children or parent not in parents)


def measure(lab, seed=1, idle_s=30, warm_dir=None, timeout=60, **env):
    work = lab / ("work-%d-%d" % (seed, time.monotonic_ns()))
    work.mkdir()
    settings = {"base_url": "http://127.0.0.1:9", "tokenizer": "/nonexistent", "input_len": 4, "output_len": 4,
                "num_prompts": 2, "seed": seed, "repeats": 2, "concurrencies": [1], "run_timeout_s": timeout,
                "warm_client": {"dir": str(warm_dir or lab / "venv"), "idle_s": idle_s}}
    client = {}
    runs = bench_runner.measure_runs(settings, "warm_fake", str(work), dict(os.environ, PYTHONPATH=str(lab / "pkg"),
                                                                           **env), client)
    return runs, client["ran_in"]


def test_measurements_fork_from_one_process_that_imported_the_client(lab):
    first, how = measure(lab)
    second, _ = measure(lab)
    assert how == "the warm client"
    results = [r["result"] for r in first + second]
    assert [r["rc"] for r in first + second] == [0, 0, 0, 0]
    imported_in = {r["imported_in"] for r in results}
    assert len(imported_in) == 1 and imported_in == set(warm_pids(lab))
    # each measurement in a child of its own, both runs of a measurement in the same one
    assert results[0]["ran_in"] == results[1]["ran_in"] != results[2]["ran_in"] == results[3]["ran_in"]
    assert not imported_in & {r["ran_in"] for r in results}


def test_the_api_key_reaches_the_client_and_not_the_warm_process(lab):
    runs, how = measure(lab, OPENAI_API_KEY="sk-warm-secret")
    assert how == "the warm client" and runs[0]["result"]["key"] == "sk-warm-secret"
    [warm] = warm_pids(lab)
    with open("/proc/%d/environ" % warm, "rb") as handle:
        assert b"sk-warm-secret" not in handle.read()
    later, _ = measure(lab)
    assert later[0]["result"]["key"] is None and later[0]["result"]["imported_in"] == warm


def test_a_hung_client_is_killed_on_time_and_its_runs_say_so(lab):
    runs, how = measure(lab, seed=4, timeout=1)
    # the client sleeps 60 s then writes its result: a run not killed would end with rc 0 and a result
    assert how == "the warm client"
    assert [r["rc"] for r in runs] == [None, None] and [r["result"] for r in runs] == [None, None]
    assert all("timed out after 2s" in r["error"] for r in runs), runs
    deadline = time.monotonic() + 10  # the killed child is gone (reaped), its warm parent is not
    while warm_pids(lab, children=True) != warm_pids(lab) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert warm_pids(lab, children=True) == warm_pids(lab) != []
    again, _ = measure(lab)  # the warm process still serves
    assert again[0]["rc"] == 0


def test_a_directory_whose_socket_path_is_longer_than_an_address_holds_still_works(lab):
    deep = lab / ("d" * 80) / ("e" * 80)  # sun_path holds 108 bytes
    deep.mkdir(parents=True)
    runs, how = measure(lab, warm_dir=deep)
    assert how == "the warm client" and runs[0]["rc"] == 0
    assert [p for p in os.listdir(deep) if p.endswith(".sock")]


def test_it_leaves_when_idle_and_a_later_measurement_starts_another(lab):
    first, _ = measure(lab, idle_s=1)
    deadline = time.monotonic() + 20
    while warm_pids(lab) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert warm_pids(lab) == [] and not [p for p in os.listdir(lab / "venv") if p.endswith(".sock")]
    second, how = measure(lab, idle_s=1)
    assert how == "the warm client" and second[0]["result"]["imported_in"] != first[0]["result"]["imported_in"]


def test_an_environment_the_import_reads_gets_a_warm_process_of_its_own(lab):
    plain, _ = measure(lab)
    offline, _ = measure(lab, HF_HUB_OFFLINE="1")
    assert plain[0]["result"]["imported_in"] != offline[0]["result"]["imported_in"]
    assert len(warm_pids(lab)) == 2


def test_without_the_warm_path_the_client_runs_in_its_own_process_and_says_why(lab):
    failed_import, how = measure(lab, WARM_FAKE_IMPORT_FAILS="1")
    assert failed_import[0]["rc"] == 0 and "before it listened" in how
    assert failed_import[0]["result"]["imported_in"] == failed_import[0]["result"]["ran_in"]
    not_asked, how = measure(lab, idle_s=0)
    assert not_asked[0]["rc"] == 0 and how == "a process of its own" and warm_pids(lab) == []


def test_a_changed_client_gets_a_warm_process_of_its_own(lab, monkeypatch):
    monkeypatch.syspath_prepend(str(lab / "pkg"))  # where the runner looks for the client's file
    before, _ = measure(lab)
    with open(lab / "pkg" / "warm_fake.py", "a", encoding="utf-8") as handle:
        handle.write("# a new release of the client\n")
    after, how = measure(lab)
    assert how == "the warm client" and after[0]["rc"] == 0
    assert before[0]["result"]["imported_in"] != after[0]["result"]["imported_in"]
    assert len(warm_pids(lab)) == 2


def test_a_caller_that_leaves_before_it_has_the_pid_leaves_no_run_behind(lab):
    """The caller then runs the client on its own; a warm child still measuring would load the server twice."""
    first, how = measure(lab)
    assert how == "the warm client"
    [sock_name] = [p for p in os.listdir(lab / "venv") if p.endswith(".sock")]
    [warm] = warm_pids(lab)
    work = lab / "abandoned"
    work.mkdir()
    plan = next(lab.glob("work-1-*/plan.json"))
    (work / "plan.json").write_text(plan.read_text().replace(str(plan.parent), str(work)))
    warm_client = bench_runner._warm_client()  # pylint: disable=protected-access
    sock = warm_client._connect(str(lab / "venv" / sock_name))  # pylint: disable=protected-access
    with sock, sock.makefile("rb") as replies:
        sock.sendall(json.dumps({"plan": str(work / "plan.json"), "env": dict(os.environ, PYTHONPATH=str(lab / "pkg")),
                                 "cwd": str(work)}).encode() + b"\n")
        child = int(replies.readline())
    deadline = time.monotonic() + 10
    while child in warm_pids(lab, children=True) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert child not in warm_pids(lab, children=True)
    assert sorted(os.listdir(work)) == ["plan.json"]  # the plan never ran
    again, _ = measure(lab)
    assert again[0]["rc"] == 0 and again[0]["result"]["imported_in"] == warm


def test_a_warm_client_that_does_not_answer_in_time_is_never_told_to_go(tmp_path):
    warm_client = bench_runner._warm_client()  # pylint: disable=protected-access
    path = str(tmp_path / "late.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    heard = []

    def answer_late():
        conn = server.accept()[0]
        with conn, conn.makefile("rb") as requests:
            requests.readline()
            time.sleep(2)  # past the caller's timeout
            with contextlib.suppress(OSError):
                conn.sendall(b"4242\n")
            heard.append(requests.readline())

    thread = threading.Thread(target=answer_late)
    thread.start()
    with pytest.raises(warm_client.Unavailable, match="did not take the measurement"):
        warm_client.run(path, ["/bin/false"], "plan.json", {}, timeout=0.5)
    thread.join(10)
    server.close()
    assert heard == [b""]  # the connection closed without a go
