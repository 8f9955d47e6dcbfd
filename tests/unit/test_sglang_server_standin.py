"""The SGLang server stand-in (lab/standins/sglang_server_standin.py), run as a subprocess on a loopback port.

Every server here is started the way the systemd unit starts it (interpreter, script, the real flags), with a
temporary config file, and is stopped with SIGTERM. Each wait is bounded against a hang (HANG_S, generous: a
busy machine only makes it slower), never a measurement. How fast it
generates is checked in-process, on the stand-in's own pacing with a clock that moves only when slept on: no test
here measures the wall clock (a busy machine slows the stand-in; its speed is for `make bench` to show).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile

import pytest

from tests.helpers import wheels
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "lab", "standins", "sglang_server_standin.py")
MODULE_UTILS = os.path.join(REPO, "module_utils")
FUSION = ["--flashinfer-allreduce-fusion-backend", "trtllm"]
FAST = {"startup_delay_s": 0, "health_check_s": 0, "tokens_per_s": 1000}
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MODEL_NAME = "/srv/models/kimi-k2.5-standin"  # Standin's default model path, served under that name
standin_module = load_file("lab/standins/sglang_server_standin.py", "sglang_server_standin")
STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d%s\] "
HANG_S = 20.0  # how long a wait may take before the stand-in counts as hung (returns as soon as it is done)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Standin(object):
    """One stand-in process: start(), HTTP helpers, output, stop()."""

    def __init__(self, tmp_path, config=None, args=(), model="/srv/models/kimi-k2.5-standin", env=None,
                 interpreter=(sys.executable,)):
        self.port = free_port()
        self.tmp_path = tmp_path
        self.config_path = str(tmp_path / "config.json")
        with open(self.config_path, "w", encoding="utf-8") as handle:
            json.dump(dict(FAST, **(config or {})), handle)
        self.args = ["--model-path", model, "--host", "127.0.0.1", "--port", str(self.port)] + list(args)
        self.env = dict(os.environ, SGLANG_STANDIN_CONFIG=self.config_path, PYTHONUNBUFFERED="1")
        self.env.pop("SGLANG_STANDIN_CLI_ARGS", None)  # the fallback list unless a test asks for the helper
        self.env.update(env or {})
        self.out_path = str(tmp_path / "stdout.log")
        self.err_path = str(tmp_path / "stderr.log")
        self.interpreter = list(interpreter)
        self.proc = None

    def start(self, wait_for="Uvicorn running on", timeout=HANG_S):
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(self.interpreter + [SCRIPT] + self.args, stdout=out, stderr=err,
                                         env=self.env, cwd=str(self.tmp_path))
        if wait_for:
            self.wait_output(wait_for, timeout)
        return self

    def output(self):
        with open(self.out_path, encoding="utf-8") as handle:
            return handle.read()

    def stderr(self):
        with open(self.err_path, encoding="utf-8") as handle:
            return handle.read()

    def wait_output(self, text, timeout=HANG_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.output():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError("no %r in the stand-in's output within %.1f s (rc=%s):\n%s\n%s"
                             % (text, timeout, self.proc.poll(), self.output(), self.stderr()))

    def wait_ready(self, timeout=HANG_S):
        self.wait_output("The server is fired up and ready to roll!", timeout)
        return self

    def exit_code(self, timeout=HANG_S):
        return self.proc.wait(timeout)

    def request(self, path, body=None, headers=None, method=None, timeout=HANG_S):
        """(status, parsed JSON or text, raw bytes)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data, method=method,
                                     headers=dict({"Content-Type": "application/json"} if data else {},
                                                  **(headers or {})))
        try:
            with NO_PROXY.open(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        try:
            return status, json.loads(raw.decode()), raw
        except ValueError:
            return status, raw.decode(), raw

    def stream(self, path, body, headers=None):
        """The SSE events of a streaming request, with the time each one arrived."""
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=json.dumps(body).encode(),
                                     headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        events = []
        with NO_PROXY.open(req, timeout=HANG_S) as resp:
            assert resp.status == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            for line in resp:
                line = line.decode().rstrip("\n")
                if line:
                    assert line.startswith("data: "), line
                    payload = line[len("data: "):]
                    events.append((time.monotonic(), payload if payload == "[DONE]" else json.loads(payload)))
        return events

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(HANG_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(HANG_S)
        return self.proc.returncode if self.proc else None


@pytest.fixture
def standin(tmp_path):
    """Makes stand-ins (not started); stops every one at the end."""
    made = []

    def make(config=None, args=(), **kwargs):
        folder = tmp_path / ("s%d" % len(made))
        folder.mkdir()
        made.append(Standin(folder, config, args, **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.stop()


class FakeClock(object):
    """The stand-in's clock and sleep in-process: time moves only when slept on, by what was asked (plus `late`,
    once per entry, to play a step that ran late)."""

    def __init__(self, late=()):
        self.now = 1000.0
        self.sleeps = []
        self.late = list(late)

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds + (self.late.pop(0) if self.late else 0.0)


def in_process(monkeypatch, tmp_path, config=None, args=(), env=None, clock=None):
    """A stand-in Server object as main() makes it (config file, flags, environment), paced by a FakeClock."""
    path = tmp_path / "in-process-config.json"
    path.write_text(json.dumps(dict(FAST, **(config or {}))))
    monkeypatch.setenv(standin_module.CONFIG_ENV, str(path))
    monkeypatch.delenv(standin_module.CLI_ARGS_ENV, raising=False)
    monkeypatch.delenv(standin_module.PCIE_SWITCH, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    cfg, _, found = standin_module.load_config()
    assert found
    flags, extra, _ = standin_module.parse_flags(["--model-path", MODEL_NAME] + list(args))
    server = standin_module.Server(flags, extra, cfg, [])
    clock = clock or FakeClock()
    server.clock, server.sleep = clock, clock.sleep
    return server, clock


def paced(server, clock, max_new_tokens, prompt="measure"):
    """Runs one greedy generation in-process: (the generation, [(seconds since it began, tokens so far)] per step)."""
    gen = standin_module.Generation(server, prompt, {"max_new_tokens": max_new_tokens, "temperature": 0})
    began = clock.now
    steps = [(clock.now - began, len(state.ids)) for state in gen.run()]  # when each step was handed on
    return gen, steps


def generate(server, prompt, max_new_tokens=8, temperature=0, **extra):
    body = dict({"text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": temperature}},
                **extra)
    status, out, _ = server.request("/generate", body)
    assert status == 200, out
    return out


# ---------------------------------------------------------------------------------------------- life cycle

def test_health_is_503_while_starting_then_200(standin):
    loading = standin({"startup_delay_s": 600}).start()  # still loading for the whole test, however slow the host
    assert loading.request("/health_generate")[0] == 503
    assert loading.request("/health")[0] == 503
    assert loading.request("/ready")[0] == 503
    assert loading.request("/generate", {"text": "x"})[0] == 503  # the "model" is still loading
    assert loading.request("/model_info")[0] == 200  # static info answers as soon as the port is bound
    assert "fired up" not in loading.output()
    assert loading.stop() == 0
    server = standin({"startup_delay_s": 0.3}).start()
    statuses = []
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        statuses.append(server.request("/health_generate")[0])
        if statuses[-1] == 200:
            break
        time.sleep(0.1)
    assert statuses[-1] == 200 and set(statuses) <= {503, 200}, statuses
    assert server.request("/health")[0] == 200 and server.request("/ready")[0] == 200
    out = server.output()
    # the real warm-up (GET /model_info, POST /generate) precedes the ready line
    assert out.index('"GET /model_info HTTP/1.1" 200 OK') < out.index('"POST /generate HTTP/1.1" 200 OK') \
        < out.index("The server is fired up and ready to roll!")
    assert server.stop() == 0


def test_health_check_waits_the_configured_time_before_it_answers(standin, monkeypatch, tmp_path):
    server, clock = in_process(monkeypatch, tmp_path, {"health_check_s": 0.3})
    handler = object.__new__(standin_module.Handler)  # the endpoint alone, without a socket
    handler.standin = server
    answered = []
    handler._empty = lambda status: answered.append((status, list(clock.sleeps)))  # pylint: disable=protected-access
    handler.r_health_generate()
    server.ready = True
    handler.r_health_generate()
    handler.r_health()
    assert answered == [(503, []), (200, [0.3]), (200, [0.3, 0.3])]  # 503 at once; 200 only after the wait
    live = standin({"health_check_s": 0.3}).start().wait_ready()
    assert live.request("/health_generate")[0] == 200


def test_never_healthy(standin):
    server = standin({"startup_delay_s": 0.2, "never_healthy": True}).start()
    server.wait_output("never_healthy is set")
    for _ in range(5):
        assert server.request("/health_generate")[0] == 503
        assert server.request("/health")[0] == 503
        time.sleep(0.1)
    assert server.request("/server_info")[0] == 200
    assert "fired up" not in server.output()
    assert server.proc.poll() is None


def test_crash_after(standin):
    server = standin({"crash_after_s": 3}).start()  # ready (warm-up included) long before that
    assert server.exit_code() == 1
    out = server.output()
    assert re.search(STAMP % "" + r"Scheduler hit an exception: Traceback \(most recent call last\):", out), out
    assert "RuntimeError: sglang STAND-IN: crash_after_s=3" in out
    assert "fired up" in out and "SIGQUIT received. signum=3" in out  # it crashed after becoming ready


def test_exit_on_start(standin):
    server = standin({"exit_on_start": 3}).start(wait_for=None)
    assert server.exit_code() == 3
    out = server.output()
    assert "Load weight begin" in out and "Scheduler hit an exception" in out
    assert "Received sigquit from a child process. It usually means the child failed." in out
    assert "Uvicorn running" not in out and "Load weight end" not in out


def test_sigterm_exits_0(standin):
    server = standin().start().wait_ready()
    server.proc.send_signal(signal.SIGTERM)
    assert server.exit_code() == 0
    out = server.output()
    assert "SIGTERM received. signum=15 frame=None. Draining requests and shutting down..." in out
    assert out.rstrip().endswith("INFO:     Finished server process [%d]" % server.proc.pid)


def test_says_it_is_a_stand_in(standin):
    server = standin().start()
    first = server.output().splitlines()[0]
    assert re.match(STAMP % "" + "sglang STAND-IN: this is a stand-in for sglang.launch_server", first), first
    assert "NOT SGLang" in first and server.config_path in first
    proc = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, check=False,
                          env=dict(os.environ, SGLANG_STANDIN_CONFIG="/nonexistent"))
    assert proc.returncode == 0 and "STAND-IN" in proc.stdout and "NOT SGLang" in proc.stdout
    with open(SCRIPT, encoding="utf-8") as handle:
        assert "STAND-IN" in handle.read(400)


def test_uvicorn_and_sglang_line_formats(standin):
    server = standin().start().wait_ready()
    out = server.output()
    assert re.search(STAMP % "" + r"INFO:     Started server process \[%d\]\n" % server.proc.pid, out)
    assert re.search(STAMP % "" + r"INFO:     Uvicorn running on http://127\.0\.0\.1:%d \(Press CTRL\+C to quit\)"
                     % server.port, out)
    assert re.search(STAMP % "" + r"INFO:     127\.0\.0\.1:\d+ - \"POST /generate HTTP/1\.1\" 200 OK", out)
    assert re.search(STAMP % "" + r"Load weight begin\. avail mem=\d+\.\d\d GB", out)
    assert re.search(STAMP % "" + r"server_args=\{'model_path': '/srv/models/kimi-k2.5-standin'", out)


# ------------------------------------------------------------------------------------------- fusion lines

ENABLED = ("FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm, rank=%d, world_size=2, "
           "max_token_num=2048, hidden_dim=7168")
SKIPPED = ("FlashInfer workspace preflight probe failed (cuMulticastGetGranularity failed for FlashInfer workspace "
           "preflight: <CUresult.CUDA_ERROR_NOT_SUPPORTED: 801>). Skipping allreduce fusion.")
VOTED = ("FlashInfer workspace preflight: cuMemCreate probe failed on at least one rank. Skipping allreduce fusion "
         "to avoid cross-rank desync inside the flashinfer collective.")
DISABLED = ("Failed to initialize FlashInfer workspace (backend=trtllm): CUDA error: peer access is not supported "
            "between these two devices. Disabling flashinfer allreduce fusion permanently.")


def fusion_lines(out):
    return [line for line in out.splitlines() if "FlashInfer" in line and "server_args=" not in line]


@pytest.mark.parametrize("variant, expected", [
    (None, [(0, ENABLED % 0), (0, ENABLED % 0), (1, ENABLED % 1), (1, ENABLED % 1)]),  # two workspaces per rank
    ("enabled", [(0, ENABLED % 0), (0, ENABLED % 0), (1, ENABLED % 1), (1, ENABLED % 1)]),
    ("skipped", [(0, SKIPPED), (0, VOTED), (1, SKIPPED), (1, VOTED)]),
    ("disabled", [(0, DISABLED), (1, DISABLED)]),
    ("none", []),
])
def test_fusion_log_variants(standin, variant, expected):
    server = standin({"fusion_log": variant} if variant else {}, ["--tp-size", "2"] + FUSION).start()
    lines = fusion_lines(server.output())
    print("\n".join(lines))
    assert len(lines) == len(expected), lines
    for line, (rank, text) in zip(lines, expected):
        assert re.match(STAMP % (" TP%d" % rank) + re.escape(text) + "$", line), (line, text)
    assert server.output().index("Load weight end") < server.output().index("Uvicorn running")


def test_fusion_lines_need_a_flag_and_more_than_one_rank(standin):
    assert fusion_lines(standin(args=["--tp-size", "2"]).start().output()) == []  # no flag: nothing
    assert fusion_lines(standin(args=FUSION).start().output()) == []  # TP 1: world_size <= 1, nothing logged


def test_the_off_switch_is_accepted_and_keeps_fusion_off(standin):
    """0.5.21's --enforce-disable-flashinfer-allreduce-fusion (arg_groups/fields/exec_.py): no fusion, whatever else
    the command line says (overrides.py's _enforce_disable_allreduce_fusion runs after every other resolution)."""
    server = standin(args=["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"] + FUSION).start()
    assert fusion_lines(server.output()) == []
    info = server.wait_ready().request("/server_info")[1]
    assert info["flashinfer_allreduce_fusion_backend"] is None
    assert info["enforce_disable_flashinfer_allreduce_fusion"] is True


def test_fusion_deprecated_flag_and_custom_error(standin):
    server = standin({"fusion_log": "skipped", "fusion_error": "boom"},
                     ["--tp", "2", "--enable-flashinfer-allreduce-fusion"]).start()
    out = server.output()
    assert "--enable-flashinfer-allreduce-fusion is deprecated. Please use --flashinfer-allreduce-fusion-backend=auto " \
           "instead." in out
    assert "FlashInfer workspace preflight probe failed (boom). Skipping allreduce fusion." in out
    assert server.request("/server_info")[1]["flashinfer_allreduce_fusion_backend"] == "auto"


def test_fusion_refused_crashes_at_start(standin):
    server = standin({"fusion_log": "refused"}, ["--tp-size", "2"] + FUSION).start(wait_for=None)
    assert server.exit_code() == 1
    out = server.output()
    assert "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs." in out
    assert "Uvicorn running" not in out


def test_fusion_trtllm_is_single_node_only(standin):
    server = standin(args=["--tp-size", "4", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr",
                           "10.0.0.1:50000"] + FUSION).start(wait_for=None)
    assert server.exit_code() == 1
    assert "ValueError: FlashInfer allreduce fusion trtllm backend supports single-node only." in server.output()


def test_second_node_serves_no_http(standin):
    server = standin(args=["--tp-size", "4", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr",
                           "10.0.0.1:50000"]).start(wait_for="no HTTP server on this node")
    out = server.output()
    assert re.search(STAMP % " TP2" + "Load weight begin", out) and " TP0]" not in out
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=0.5)
    assert server.stop() == 0


def test_sigterm_while_a_line_is_written_still_shuts_down(tmp_path):
    """systemctl stop may land while emit() holds the log lock: the stand-in must not wait on itself."""
    script = tmp_path / "sigterm_in_emit.py"
    script.write_text(
        "import importlib.util, os, signal, sys, time\n"
        "spec = importlib.util.spec_from_file_location('standin', %r)\n"
        "standin = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(standin)\n"
        "signal.signal(signal.SIGTERM, standin.on_sigterm)\n"
        "with standin._log_lock:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(0.2)  # the handler has run by now, with the lock still held\n"
        "time.sleep(%r)\n" % (SCRIPT, HANG_S), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=2 * HANG_S,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "SIGTERM received. signum=%d" % signal.SIGTERM in done.stdout
    assert re.search(r"Finished server process \[\d+\]", done.stdout)


# ---------------------------------------------------------------------------------------------- info APIs

EAGLE = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/srv/models/draft",
         "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def test_server_info_reports_the_flags(standin):
    args = ["--tp", "2", "--served-model-name", "kimi", "--mem-fraction-static", "0.85", "--cuda-graph-max-bs-decode",
            "16", "--trust-remote-code", "--enable-metrics", "--nnodes", "1", "--node-rank", "0"] + EAGLE + FUSION
    server = standin({"accept_length": 2.5}, args).start().wait_ready()
    generate(server, "a long enough answer", max_new_tokens=100)  # 40 verify steps of 2.5 tokens
    for path in ("/server_info", "/get_server_info"):
        status, info, _ = server.request(path)
        assert status == 200
        expected = {"tp_size": 2, "model_path": "/srv/models/kimi-k2.5-standin", "served_model_name": "kimi",
                    "mem_fraction_static": 0.85, "cuda_graph_max_bs_decode": 16, "trust_remote_code": True,
                    "enable_metrics": True, "nnodes": 1, "node_rank": 0, "port": server.port,
                    "host": "127.0.0.1", "speculative_algorithm": "EAGLE3",
                    "speculative_draft_model_path": "/srv/models/draft", "speculative_num_steps": 3,
                    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                    "flashinfer_allreduce_fusion_backend": "trtllm", "api_key": None, "frontend": "python"}
        assert {key: info.get(key) for key in expected} == expected
        assert info["version"] and info["launch_command"].endswith(" ".join(server.args))
        assert "STAND-IN" in info["standin"]
        state = info["internal_states"][0]
        # the warm-up request (8 tokens in 4 steps: the last one is cut short) and the 100-token one
        assert state["avg_spec_accept_length"] == pytest.approx(108 / 44.0)
    assert "Endpoint '/get_server_info' is deprecated" in server.output()


def test_speculative_defaults_when_unset(standin):
    server = standin(args=["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d"]).start()
    info = server.request("/server_info")[1]
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) \
        == (3, 1, 4)
    plain = standin().start().request("/server_info")[1]
    assert plain["speculative_algorithm"] is None and "avg_spec_accept_length" not in plain["internal_states"][0]


def test_model_info_and_models(standin):
    server = standin(args=["--served-model-name", "kimi"]).start()
    for path in ("/model_info", "/get_model_info"):
        status, info, _ = server.request(path)
        assert status == 200 and info["model_path"] == "/srv/models/kimi-k2.5-standin"
        assert info["served_model_name"] == "kimi" and info["is_generation"] is True
    status, models, _ = server.request("/v1/models")
    assert status == 200 and models["object"] == "list"
    assert [(m["id"], m["owned_by"], m["object"]) for m in models["data"]] == [("kimi", "sglang", "model")]
    assert server.request("/v1/models/kimi")[0] == 200 and server.request("/v1/models/other")[0] == 404
    assert server.request("/nope")[0] == 404 and server.request("/generate")[0] == 405


def test_model_config_json_is_read_when_present(standin, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"],
                                                   "model_type": "kimi_k25", "text_config": {"hidden_size": 4096}}))
    server = standin({"fusion_log": "enabled"}, ["--tp-size", "2"] + FUSION, model=str(model)).start()
    assert "hidden_dim=4096" in server.output() and "type=KimiK25ForConditionalGeneration" in server.output()
    assert server.request("/model_info")[1]["architectures"] == ["KimiK25ForConditionalGeneration"]


def test_metrics_only_with_the_flag(standin):
    assert standin().start().request("/metrics")[0] == 404
    server = standin(args=["--enable-metrics"]).start().wait_ready()
    status, text, _ = server.request("/metrics")
    label = 'engine_type="unified",is_streaming="%s",model_name="' + MODEL_NAME + '"'
    # the start-up warm-up is counted, as the real server counts its own (8 new tokens there too)
    assert status == 200 and "sglang:generation_tokens_total{%s} 8.0" % (label % "false") in text
    assert 'is_streaming="true"' not in text  # no streamed request yet: no such sample
    server.request("/generate", {"text": "counted", "sampling_params": {"max_new_tokens": 3, "temperature": 0}})
    server.stream("/generate", {"text": "streamed", "stream": True,
                                "sampling_params": {"max_new_tokens": 5, "temperature": 0}})
    text = server.request("/metrics")[1]
    assert "sglang:generation_tokens_total{%s} 11.0" % (label % "false") in text
    assert "sglang:generation_tokens_total{%s} 5.0" % (label % "true") in text
    assert 'sglang:num_running_reqs{engine_type="unified",model_name="%s",moe_ep_rank="0",pp_rank="0",' \
           'tp_rank="0"} 0.0' % MODEL_NAME in text


def test_request_time_stats_only_with_metrics(standin):
    body = {"text": "timed", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
    plain = standin().start().wait_ready().request("/generate", body)[1]["meta_info"]
    timed = standin(args=["--enable-metrics"]).start().wait_ready().request("/generate", body)[1]["meta_info"]
    stats = {"forward_entry_time", "prefill_finished_time", "queue_time", "request_received_ts", "first_token_latency",
             "api_server_dispatch_finish_ts", "request_finished_ts", "decode_throughput"}
    assert not stats & set(plain) and stats <= set(timed)
    assert timed["request_received_ts"] <= timed["prefill_finished_time"] <= timed["request_finished_ts"]
    assert timed["decode_throughput"] > 0 and list(timed)[-1] == "response_sent_to_client_ts"


@pytest.mark.parametrize("value,text", [(21, "21.0"), (0, "0.0"), (0.5, "0.5"), (999999.0, "999999.0"),
                                        (1e6, "1e+06"), (12345678.9, "1.23456789e+07"), (3e10, "3e+10"),
                                        (float("inf"), "+Inf"), (float("nan"), "NaN")])
def test_sample_values_are_printed_as_prometheus_client_prints_them(value, text):
    assert standin_module.prometheus_float(value) == text


# --------------------------------------------------------------------------------------------- generation

def test_generate_non_stream(standin):
    server = standin(args=EAGLE).start().wait_ready()
    out = generate(server, "The capital of France is", max_new_tokens=12)
    assert set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert meta["completion_tokens"] == 12 == len(out["output_ids"]) and meta["prompt_tokens"] == 5
    assert meta["finish_reason"] == {"type": "length", "length": 12}
    assert meta["e2e_latency"] > 0 and meta["spec_verify_ct"] == 6 and meta["spec_accept_length"] == 2.0
    assert meta["spec_num_proposed_drafts"] == 18 and meta["spec_num_correct_drafts"] == 6
    assert out["text"].strip()
    ids = server.request("/generate", {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 3}})[1]
    assert ids["meta_info"]["prompt_tokens"] == 3 and ids["meta_info"]["completion_tokens"] == 3
    batch = server.request("/generate", {"text": ["a", "b c"], "sampling_params": {"max_new_tokens": 2}})[1]
    assert [b["meta_info"]["prompt_tokens"] for b in batch] == [1, 2]
    assert server.request("/generate", {"sampling_params": {}})[0] == 400
    assert server.request("/generate", b"{not json")[0] == 400


def test_generate_stop_string(standin):
    server = standin().start().wait_ready()
    text = generate(server, "stop test", max_new_tokens=20)["text"]
    word = text.split()[3]
    out = server.request("/generate", {"text": "stop test", "sampling_params": {
        "max_new_tokens": 20, "temperature": 0, "stop": [word]}})[1]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": word}
    assert word not in out["text"] and text.startswith(out["text"])


def test_generate_stream(standin):
    server = standin(args=EAGLE).start().wait_ready()
    events = server.stream("/generate", {"text": "Stream me", "stream": True,
                                         "sampling_params": {"max_new_tokens": 9, "temperature": 0}})
    assert events[-1][1] == "[DONE]"
    chunks = [payload for _, payload in events[:-1]]
    assert len(chunks) == 5  # accept length 2: 2+2+2+2+1 tokens per verify step
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == [2, 4, 6, 8, 9]
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 9}
    assert "e2e_latency" in chunks[-1]["meta_info"] and "e2e_latency" not in chunks[0]["meta_info"]
    for before, after in zip(chunks, chunks[1:]):  # cumulative text, as without --incremental-streaming-output
        assert after["text"].startswith(before["text"])
    assert chunks[-1]["text"] == generate(server, "Stream me", max_new_tokens=9)["text"]


def test_v1_completions(standin):
    server = standin(args=["--served-model-name", "kimi"]).start().wait_ready()
    status, out, _ = server.request("/v1/completions", {"model": "kimi", "prompt": "Say hi", "max_tokens": 7,
                                                        "temperature": 0})
    assert status == 200, out
    assert out["object"] == "text_completion" and out["model"] == "kimi"
    choice = out["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "length" and choice["matched_stop"] is None
    assert out["usage"]["completion_tokens"] == 7 and out["usage"]["prompt_tokens"] == 2
    assert out["usage"]["total_tokens"] == 9 and out["metadata"] == {"weight_version": "default"}
    assert choice["text"] == generate(server, "Say hi", max_new_tokens=7)["text"]  # same model, same greedy text
    default = server.request("/v1/completions", {"prompt": "Say hi", "temperature": 0})[1]
    assert default["usage"]["completion_tokens"] == 16  # OpenAI's default max_tokens
    events = server.stream("/v1/completions", {"model": "kimi", "prompt": "Say hi", "max_tokens": 7, "temperature": 0,
                                               "stream": True, "stream_options": {"include_usage": True}})
    assert events[-1][1] == "[DONE]"
    chunks = [payload for _, payload in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == choice["text"]  # deltas
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 7
    status, bad, _ = server.request("/v1/completions", b'{"prompt": "x"}', headers={"Content-Type": "text/plain"})
    assert status == 400 and bad["object"] == "error"


def test_v1_chat_completions(standin):
    server = standin().start().wait_ready()
    status, out, _ = server.request("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                             "max_tokens": 4, "temperature": 0})
    assert status == 200 and out["object"] == "chat.completion"
    assert out["choices"][0]["message"]["role"] == "assistant" and out["usage"]["completion_tokens"] == 4
    events = server.stream("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                    "max_tokens": 4, "temperature": 0, "stream": True,
                                                    "stream_options": {"include_usage": True}})
    assert events[-1][1] == "[DONE]"
    chunks = [payload for _, payload in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks[:-1])
    assert text == out["choices"][0]["message"]["content"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 4
    plain = server.stream("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                   "max_tokens": 4, "temperature": 0, "stream": True})
    assert all(p["usage"] is None and p["choices"] for _, p in plain[:-1])  # no usage chunk unless asked


def test_step_deadlines_reach_n_tokens_at_n_over_the_rate():
    assert standin_module.step_deadlines([1, 1, 1, 1], 200.0) == [(1, 0.005), (2, 0.01), (3, 0.015), (4, 0.02)]
    assert standin_module.step_deadlines([3, 3, 1], 100.0) == [(3, 0.03), (6, 0.06), (7, 0.07)]
    assert standin_module.step_deadlines([], 100.0) == []


def test_a_request_is_paced_to_tokens_per_s(monkeypatch, tmp_path):
    rate, tokens = 200.0, 150
    server, clock = in_process(monkeypatch, tmp_path, {"tokens_per_s": rate})
    gen, steps = paced(server, clock, tokens)
    assert gen.rate == rate and len(gen.ids) == tokens and gen.finish_reason == {"type": "length", "length": tokens}
    # one token a step (no speculation), each sent at k / rate: 150 tokens at 200 tok/s end at 0.75 s
    assert [n for _, n in steps] == list(range(1, tokens + 1))
    assert [t for t, _ in steps] == pytest.approx([k / rate for k in range(1, tokens + 1)])
    assert clock.sleeps == pytest.approx([1 / rate] * tokens)


def test_a_late_step_is_made_up_by_the_next_pauses(monkeypatch, tmp_path):
    """The pauses aim at deadlines: a step that ran 35 ms late (a busy host) is followed by no pause until the
    request is back on time, and the request still ends at n / rate."""
    server, clock = in_process(monkeypatch, tmp_path, {"tokens_per_s": 100}, clock=FakeClock(late=[0.035]))
    _, steps = paced(server, clock, 10)
    assert [t for t, _ in steps] == pytest.approx([0.045, 0.045, 0.045, 0.045, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1])
    assert clock.sleeps == pytest.approx([0.01, 0.005, 0.01, 0.01, 0.01, 0.01, 0.01])


def test_plain_tokens_per_s_paces_a_server_without_speculation(monkeypatch, tmp_path):
    config = {"tokens_per_s": 130, "plain_tokens_per_s": 85}
    plain, plain_clock = in_process(monkeypatch, tmp_path, config)
    spec, spec_clock = in_process(monkeypatch, tmp_path, config, EAGLE)
    assert paced(plain, plain_clock, 17)[1][-1] == (pytest.approx(17 / 85.0), 17)
    assert paced(spec, spec_clock, 26)[1][-1] == (pytest.approx(26 / 130.0), 26)


def test_speculative_chunks_keep_the_rate(standin, monkeypatch, tmp_path):
    rate = 200.0
    server, clock = in_process(monkeypatch, tmp_path, {"tokens_per_s": rate, "accept_length": 3.0}, EAGLE)
    gen, steps = paced(server, clock, 90)
    assert gen.verify_ct == 30 and [n for _, n in steps] == list(range(3, 91, 3))  # 3 tokens a verify step
    assert [t for t, _ in steps] == pytest.approx([n / rate for n in range(3, 91, 3)])  # the rate holds per token
    live = standin({"tokens_per_s": 1000, "accept_length": 3.0}, EAGLE).start().wait_ready()
    assert generate(live, "measure", max_new_tokens=90)["meta_info"]["spec_verify_ct"] == 30


def test_noise_is_bounded_and_seeded(monkeypatch, tmp_path):
    rate = 400.0
    assert standin_module.noisy_rate(rate, 20, -1.0) == pytest.approx(320.0)
    assert standin_module.noisy_rate(rate, 20, 1.0) == pytest.approx(480.0)
    assert standin_module.noisy_rate(rate, 20, 0.0) == rate
    config = {"tokens_per_s": rate, "noise_pct": 20, "seed": 7}
    server, _ = in_process(monkeypatch, tmp_path, config)
    rates = [server.speed() for _ in range(200)]
    assert all(0.8 * rate <= r <= 1.2 * rate for r in rates)
    assert min(rates) < 0.85 * rate and max(rates) > 1.15 * rate  # it does vary, over the whole band
    again, _ = in_process(monkeypatch, tmp_path, config)
    assert [again.speed() for _ in range(200)] == rates  # the seed decides
    other, _ = in_process(monkeypatch, tmp_path, dict(config, seed=8))
    assert [other.speed() for _ in range(200)] != rates
    quiet, _ = in_process(monkeypatch, tmp_path, {"tokens_per_s": rate})
    assert {quiet.speed() for _ in range(20)} == {rate}
    # a request is paced at the rate drawn for it
    noisy, clock = in_process(monkeypatch, tmp_path, config)
    gen, steps = paced(noisy, clock, 60)
    assert gen.rate == rates[0] != rate and steps[-1] == (pytest.approx(60 / rates[0]), 60)


def test_greedy_output_is_deterministic(standin):
    first = standin().start().wait_ready()
    again = standin().start().wait_ready()
    a = generate(first, "What is 2+2?", max_new_tokens=16)["text"]
    assert generate(first, "What is 2+2?", max_new_tokens=16)["text"] == a
    assert generate(again, "What is 2+2?", max_new_tokens=16)["text"] == a  # across restarts too
    assert generate(first, "What is 2+3?", max_new_tokens=16)["text"] != a
    assert a.startswith(generate(first, "What is 2+2?", max_new_tokens=5)["text"])  # a prefix of a longer answer
    sampled = {generate(first, "What is 2+2?", max_new_tokens=16, temperature=0.8)["text"] for _ in range(3)}
    assert len(sampled) > 1


def test_wrong_output_differs(standin):
    right = standin().start()
    wrong = standin({"wrong_output": True}).start()
    right.wait_ready()
    wrong.wait_ready()
    good = generate(right, "What is 2+2?", max_new_tokens=16)
    bad = generate(wrong, "What is 2+2?", max_new_tokens=16)
    print("\nright: %r\nwrong: %r" % (good["text"], bad["text"]))
    assert bad["text"] != good["text"] and bad["output_ids"] != good["output_ids"]
    assert generate(wrong, "What is 2+2?", max_new_tokens=16)["text"] == bad["text"]  # deterministic garbage
    assert bad["meta_info"]["completion_tokens"] == 16


def logprob_generate(server, prompt, max_new_tokens=8, top=2):
    return generate(server, prompt, max_new_tokens=max_new_tokens, return_logprob=True, top_logprobs_num=top)


def test_logprobs_come_as_the_real_server_sends_them(standin):
    server = standin().start().wait_ready()
    out = logprob_generate(server, "What is 2+2?")
    meta = out["meta_info"]
    assert meta["output_token_logprobs_length"] == 8 == len(meta["output_top_logprobs"])
    for token_id, chosen, top in zip(out["output_ids"], meta["output_token_logprobs"], meta["output_top_logprobs"]):
        assert chosen[1:] == [token_id, None] and len(top) == 2
        assert top[0][1] == token_id and top[0][0] == chosen[0] > top[1][0]  # greedy took the best; no tie here
    assert "output_top_logprobs" not in generate(server, "What is 2+2?", return_logprob=True)["meta_info"]
    assert "output_token_logprobs" not in generate(server, "What is 2+2?")["meta_info"]
    assert out["output_ids"] == generate(server, "What is 2+2?")["output_ids"]  # asking for logprobs changes nothing


def test_a_greedy_tie_reports_one_logprob_and_the_tie_break_picks_the_token(standin):
    plain = standin().start()
    first = standin({"greedy_ties": [3], "tie_break": "first"}).start()
    second = standin({"greedy_ties": [3], "tie_break": "second"}).start()
    outs = [logprob_generate(s.wait_ready(), "What is 2+2?", max_new_tokens=12) for s in (plain, first, second)]
    assert outs[1]["output_ids"] == outs[0]["output_ids"]  # the first of the tied pair is the untied choice
    assert outs[2]["output_ids"][:3] == outs[0]["output_ids"][:3] and outs[2]["output_ids"][3] != outs[0]["output_ids"][3]
    for out in outs[1:]:
        top = out["meta_info"]["output_top_logprobs"][3]
        assert top[0][0] == top[1][0] and out["output_ids"][3] in (top[0][1], top[1][1])
    assert outs[0]["meta_info"]["output_top_logprobs"][3][1][0] < outs[0]["meta_info"]["output_top_logprobs"][3][0][0]
    # after the tie the completion follows the token taken
    assert outs[2]["output_ids"][4:] != outs[0]["output_ids"][4:]


def test_garbage_has_no_ties_and_bad_logprob_fields_are_refused(standin):
    wrong = standin({"wrong_output": True, "greedy_ties": [0, 1, 2]}).start().wait_ready()
    top = logprob_generate(wrong, "What is 2+2?")["meta_info"]["output_top_logprobs"]
    assert all(row[0][0] > row[1][0] for row in top)
    status, out, _ = wrong.request("/generate", {"text": "x", "return_logprob": "yes"})
    assert status == 400 and "return_logprob must be true or false" in out["error"]["message"]
    status, out, _ = wrong.request("/generate", {"text": "x", "return_logprob": True, "top_logprobs_num": -1})
    assert status == 400 and "top_logprobs_num" in out["error"]["message"]


# ------------------------------------------------------------------------------------------------ API key

def test_api_key(standin):
    server = standin(args=["--api-key", "s3cret"]).start().wait_ready()
    for path in ("/generate", "/v1/completions"):
        status, body, _ = server.request(path, {"text": "x", "prompt": "x"})
        assert (status, body) == (401, {"error": "Unauthorized"})
    assert server.request("/server_info")[0] == 401 and server.request("/model_info")[0] == 401
    assert server.request("/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert server.request("/v1/models", headers={"Authorization": "Basic s3cret"})[0] == 401
    good = {"Authorization": "Bearer s3cret"}
    assert server.request("/v1/models", headers=good)[0] == 200
    assert server.request("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2}}, headers=good)[0] == 200
    # health and readiness stay open, as in sglang/srt/utils/auth.py (probes carry no secret)
    assert server.request("/health")[0] == 200 and server.request("/health_generate")[0] == 200
    assert server.request("/ready")[0] == 200
    assert "s3cret" not in server.output().split("server_args=")[0]


def test_api_key_from_a_config_file_stays_out_of_the_process_arguments(standin, tmp_path):
    """How the sglang_server role passes the key: --config <yaml> (sglang 0.5.4-0.5.23 merge it in memory)."""
    options = tmp_path / "api-key.yaml"
    options.write_text('api-key: "s3cret-from-file"\n')
    server = standin(args=["--config", str(options)]).start().wait_ready()
    good = {"Authorization": "Bearer s3cret-from-file"}
    assert server.request("/v1/models")[0] == 401
    assert server.request("/v1/models", headers=good)[0] == 200
    with open("/proc/%d/cmdline" % server.proc.pid, "rb") as handle:
        cmdline = handle.read()
    assert str(options).encode() in cmdline and b"s3cret-from-file" not in cmdline


def test_a_key_that_begins_with_a_dash_stops_the_start_as_it_stopped_the_real_server(tmp_path):
    """The real 0.5.17 merged --config into `--api-key VALUE` and argparse took "-..." for an option (device run of
    2026-12-03, 21:02 UTC); sglang_server refuses such a key before it writes anything."""
    options = tmp_path / "api-key.yaml"
    options.write_text('api-key: "-Zq81xKdfe0"\n')
    proc = run_flags(["--model-path", "/m", "--config", str(options)])
    assert proc.returncode == 2 and "argument --api-key: expected one argument" in proc.stderr


def test_config_file_must_be_yaml(standin, tmp_path):
    options = tmp_path / "api-key.env"
    options.write_text("api-key: x\n")
    proc = run_flags(["--model-path", "/m", "--config", str(options)])
    assert proc.returncode == 2 and "YAML" in proc.stderr


# ---------------------------------------------------------------------------------------------------- flags

def run_flags(args, env=None, interpreter=(sys.executable,)):
    base = dict(os.environ, SGLANG_STANDIN_CONFIG="/nonexistent/config.json")
    base.pop("SGLANG_STANDIN_CLI_ARGS", None)
    return subprocess.run(list(interpreter) + [SCRIPT] + list(args), capture_output=True, text=True, check=False,
                          env=dict(base, **(env or {})), timeout=10)


def test_unknown_flag_exits_2(standin):
    proc = run_flags(["--model-path", "/m", "--no-such-flag", "1"])
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == "sglang serve: error: unrecognized arguments: --no-such-flag 1"
    proc = run_flags(["--model-path", "/m", "--cuda-graph-max-bs", "8"])  # gone in 0.5.21: only -decode/-prefill
    assert proc.returncode == 2
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, " \
           "--cuda-graph-max-bs-prefill" in proc.stderr
    proc = run_flags(["--model-path", "/m", "--flashinfer-allreduce-fusion-backend", "nccl"])
    assert proc.returncode == 2 and "invalid choice: 'nccl'" in proc.stderr
    assert run_flags(["--tp-size", "2"]).returncode == 2  # --model-path is required


PATHS = {"allreduce_paths": {"nccl": {"tokens_per_s": 100}, "fusion": {"tokens_per_s": 400},
                              "pcie_ipc": {"tokens_per_s": 300, "wrong_output": True}}}


@pytest.mark.parametrize("args,env,path", [
    (["--tp-size", "2"], {}, "nccl"),
    (["--tp-size", "2"] + FUSION, {}, "fusion"),
    (["--tp-size", "1"] + FUSION, {}, "nccl"),  # one rank: nothing to all-reduce, no fusion line either
    (["--tp-size", "2"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, "pcie_ipc"),
    (["--tp-size", "2"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}, "nccl"),
    (["--tp-size", "6"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, "nccl"),  # world size PCIe IPC does not build
    (["--tp-size", "2"] + FUSION, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "true"}, "fusion+pcie_ipc"),
    # the roles' nccl and pcie_ipc paths pass 0.5.21's off switch; it wins over a fusion flag, as in the real release
    (["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"], {}, "nccl"),
    (["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"},
     "pcie_ipc"),
    (["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"] + FUSION, {}, "nccl"),
])
def test_the_allreduce_path_is_read_from_the_flags_and_environment(standin, args, env, path):
    server = standin(PATHS, args, env=env).start().wait_ready()
    status, info, _ = server.request("/server_info")
    assert status == 200 and info["standin_allreduce_path"] == path
    note = "sglang STAND-IN: all-reduce path %s (allreduce_paths" % path
    assert note in server.output()


@pytest.mark.parametrize("args,env,path,rate", [
    (["--tp-size", "2"], {}, "nccl", 100),
    (["--tp-size", "2"] + FUSION, {}, "fusion", 400),
    (["--tp-size", "2"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, "pcie_ipc", 300),
])
def test_each_path_is_paced_at_its_own_speed(monkeypatch, tmp_path, args, env, path, rate):
    server, clock = in_process(monkeypatch, tmp_path, PATHS, args, env)
    assert server.allreduce_path == path and server.speed() == rate
    assert paced(server, clock, 60)[1][-1] == (pytest.approx(60.0 / rate), 60)


def test_each_path_runs_at_its_own_speed_and_one_can_be_made_wrong(standin):
    nccl = standin(PATHS, ["--tp-size", "2"]).start()
    fusion = standin(PATHS, ["--tp-size", "2"] + FUSION).start()
    ipc = standin(PATHS, ["--tp-size", "2"], env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}).start()
    for server in (nccl, fusion, ipc):
        server.wait_ready()
    assert "all-reduce path nccl (allreduce_paths): tokens_per_s=100, wrong_output=false" in nccl.output()
    assert "all-reduce path fusion (allreduce_paths): tokens_per_s=400, wrong_output=false" in fusion.output()
    assert "all-reduce path pcie_ipc (allreduce_paths): tokens_per_s=300, wrong_output=true" in ipc.output()
    right = generate(nccl, "What is 2+2?", max_new_tokens=16)["text"]
    assert generate(fusion, "What is 2+2?", max_new_tokens=16)["text"] == right
    assert generate(ipc, "What is 2+2?", max_new_tokens=16)["text"] != right  # wrong_output on that path only


@pytest.mark.parametrize("paths,words", [
    ({"ring": {}}, "unknown path 'ring'"),
    ({"fusion": {"tokens_per_s": 0}}, "allreduce_paths.fusion.tokens_per_s must be a number > 0"),
    ({"fusion": {"speed": 5}}, "must be an object with only tokens_per_s, wrong_output, tie_break"),
    ({"nccl": {"wrong_output": "yes"}}, "allreduce_paths.nccl.wrong_output must be true or false"),
    ({"fusion": {"tie_break": "last"}}, "allreduce_paths.fusion.tie_break must be one of first, second"),
    (["fusion"], "allreduce_paths must be an object"),
])
def test_bad_allreduce_paths_exit_78(tmp_path, paths, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"allreduce_paths": paths}))
    proc = run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)})
    assert proc.returncode == 78 and words in proc.stderr


def test_bad_config_exits_78(standin, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"tokens_per_second": 5}))
    proc = run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)})
    assert proc.returncode == 78 and "unknown key(s) tokens_per_second" in proc.stderr
    path.write_text(json.dumps({"fusion_log": "maybe"}))
    assert run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)}).returncode == 78
    for bad, words in (({"greedy_ties": [-1]}, "greedy_ties must be a list"), ({"tie_break": 2}, "tie_break must be")):
        path.write_text(json.dumps(bad))
        proc = run_flags(["--model-path", "/m"], env={"SGLANG_STANDIN_CONFIG": str(path)})
        assert proc.returncode == 78 and words in proc.stderr


@pytest.fixture
def sglang_0521_site(tmp_path):
    """A site-packages with sglang 0.5.21's argument definitions (from the real wheel, cached), nothing else."""
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    # Fetched here, not only found: under pytest-xdist this file may run before the integration tests download it.
    with zipfile.ZipFile(wheels.wheel("sglang", "0.5.21")) as wheel:
        for name in wheel.namelist():
            if name == "sglang/srt/server_args.py" or name.startswith("sglang/srt/arg_groups/") \
                    or name == "sglang-0.5.21.dist-info/METADATA":
                wheel.extract(name, str(site))
    return str(site)


@pytest.mark.wheels
def test_flags_checked_with_the_installed_sglang(standin, sglang_0521_site):
    env = {"PYTHONPATH": sglang_0521_site, "SGLANG_STANDIN_CLI_ARGS": MODULE_UTILS}
    proc = run_flags(["--model-path", "/m", "--no-such-flag", "1"], env)
    assert proc.returncode == 2
    assert "sglang serve: error: unknown flag --no-such-flag" in proc.stderr and "sglang 0.5.21" in proc.stderr
    proc = run_flags(["--model-path", "/m", "--cuda-graph-max-bs", "8"], env)
    assert proc.returncode == 2 and "ambiguous abbreviation of --cuda-graph-max-bs-decode" in proc.stderr
    server = standin(args=["--tp", "2", "--cuda-graph-max-bs-decode", "8", "--enable-mixed-chunk"] + FUSION,
                     env=env).start()
    assert "Flags checked with SGLang 0.5.21's own flag definitions" in server.output()
    # the off switch the roles pass on the paths without fusion: 0.5.21 declares it, and it wins
    off = standin(args=["--tp", "2", "--enforce-disable-flashinfer-allreduce-fusion"] + FUSION, env=env).start()
    assert "Flags checked with SGLang 0.5.21's own flag definitions" in off.output()
    assert off.wait_ready().request("/server_info")[1]["flashinfer_allreduce_fusion_backend"] is None
    info = server.request("/server_info")[1]
    assert info["tp_size"] == 2 and info["cuda_graph_max_bs_decode"] == 8  # --tp: an abbreviation argparse takes
    assert info["enable_mixed_chunk"] is True and info["version"] == "0.5.21"


@pytest.mark.wheels
def test_flags_checked_without_ansible_like_the_lab(standin, sglang_0521_site, tmp_path):
    """The lab copies sglang_cli_args.py alone next to the stand-in, and its venv has no Ansible."""
    lone = tmp_path / "opt-sglang-standin"
    lone.mkdir()
    shutil.copy(os.path.join(MODULE_UTILS, "sglang_cli_args.py"), str(lone))
    env = {"PYTHONPATH": sglang_0521_site, "SGLANG_STANDIN_CLI_ARGS": str(lone)}
    proc = run_flags(["--model-path", "/m", "--no-such-flag"], env, interpreter=(sys.executable, "-S"))
    assert proc.returncode == 2 and "sglang 0.5.21" in proc.stderr, proc.stderr
    server = standin(args=["--tp", "2"], env=env, interpreter=(sys.executable, "-S")).start()
    assert "Flags checked with SGLang 0.5.21's own flag definitions" in server.output()


def test_falls_back_to_its_own_list_when_the_helper_is_unusable(standin, tmp_path):
    server = standin(env={"SGLANG_STANDIN_CLI_ARGS": str(tmp_path / "nothing-here")}).start()
    assert "Flags checked with the stand-in's own list of sglang 0.5.21 flags (no sglang_cli_args.py in" \
        in server.output()
    no_sglang = standin(env={"SGLANG_STANDIN_CLI_ARGS": MODULE_UTILS}).start()  # helper present, sglang absent
    assert "sglang_cli_args.known_flags(" in no_sglang.output() and "failed" in no_sglang.output()
