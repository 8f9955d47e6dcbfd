"""The SGLang server stand-in (lab/standins/sglang_server_standin.py and its package sglang_standin/) as its tests
drive it: a subprocess started the way the systemd unit starts it, with a temporary config file, stopped with
SIGTERM; or its Server object in-process, paced by a clock that moves only when slept on.

Every wait is bounded against a hang (HANG_S, generous: a busy machine only makes it slower), never a measurement.
The fixtures that make stand-ins are in tests/unit/conftest.py.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDINS = os.path.join(REPO, "lab", "standins")
SCRIPT = os.path.join(STANDINS, "sglang_server_standin.py")
PACKAGE = os.path.join(STANDINS, "sglang_standin")
MODULE_UTILS = os.path.join(REPO, "module_utils")
if STANDINS not in sys.path:  # the package as the entry script imports it
    sys.path.insert(0, STANDINS)

# pylint: disable=wrong-import-position
from sglang_standin import (  # noqa: E402,F401  (the modules the tests call)
    allreduce, flag_table, flags, generation, http_api, metrics, server as server_module)
from sglang_standin import config as standin_config  # noqa: E402

FUSION = ["--flashinfer-allreduce-fusion-backend", "trtllm"]
EAGLE = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/srv/models/draft",
         "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
FAST = {"startup_delay_s": 0, "health_check_s": 0, "tokens_per_s": 1000}
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
MODEL_NAME = "/srv/models/kimi-k2.5-standin"  # Standin's default model path, served under that name
STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d%s\] "
HANG_S = 20.0  # how long a wait may take before the stand-in counts as hung (returns as soon as it is done)


def package_sources():
    """The text of every module of the stand-in's package (for the format strings it prints)."""
    texts = []
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE, name), encoding="utf-8") as handle:
                texts.append(handle.read())
    return "\n".join(texts)


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
    monkeypatch.setenv(standin_config.CONFIG_ENV, str(path))
    monkeypatch.delenv(flags.CLI_ARGS_ENV, raising=False)
    monkeypatch.delenv(allreduce.PCIE_SWITCH, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    cfg, _, found = standin_config.load_config()
    assert found
    parsed, extra, _ = flags.parse_flags(["--model-path", MODEL_NAME] + list(args))
    server = server_module.Server(parsed, extra, cfg, [])
    clock = clock or FakeClock()
    server.clock, server.sleep = clock, clock.sleep
    return server, clock


def paced(server, clock, max_new_tokens, prompt="measure"):
    """Runs one greedy generation in-process: (the generation, [(seconds since it began, tokens so far)] per step)."""
    gen = generation.Generation(server, prompt, {"max_new_tokens": max_new_tokens, "temperature": 0})
    began = clock.now
    steps = [(clock.now - began, len(state.ids)) for state in gen.run()]  # when each step was handed on
    return gen, steps


def generate(server, prompt, max_new_tokens=8, temperature=0, **extra):
    body = dict({"text": prompt, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": temperature}},
                **extra)
    status, out, _ = server.request("/generate", body)
    assert status == 200, out
    return out


def logprob_generate(server, prompt, max_new_tokens=8, top=2):
    return generate(server, prompt, max_new_tokens=max_new_tokens, return_logprob=True, top_logprobs_num=top)


def run_flags(args, env=None, interpreter=(sys.executable,)):
    base = dict(os.environ, SGLANG_STANDIN_CONFIG="/nonexistent/config.json")
    base.pop("SGLANG_STANDIN_CLI_ARGS", None)
    return subprocess.run(list(interpreter) + [SCRIPT] + list(args), capture_output=True, text=True, check=False,
                          env=dict(base, **(env or {})), timeout=10)

