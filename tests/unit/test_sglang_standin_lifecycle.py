"""The stand-in's life cycle: health while "loading" and after, SIGTERM (also while a line is being written),
a second node without HTTP. Run as a subprocess on a loopback port (tests/helpers/sglang_standin.py)."""
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers.sglang_standin import HANG_S, STAMP, STANDINS, http_api, in_process


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
    handler = object.__new__(http_api.Handler)  # the endpoint alone, without a socket
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


def test_sigterm_exits_0(standin):
    server = standin().start().wait_ready()
    server.proc.send_signal(signal.SIGTERM)
    assert server.exit_code() == 0
    out = server.output()
    assert "SIGTERM received. signum=15 frame=None. Draining requests and shutting down..." in out
    assert out.rstrip().endswith("INFO:     Finished server process [%d]" % server.proc.pid)


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
        "import os, signal, sys, time\n"
        "sys.path.insert(0, %r)\n"
        "from sglang_standin import lifecycle, logs\n"
        "signal.signal(signal.SIGTERM, lifecycle.on_sigterm)\n"
        "with logs._log_lock:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(0.2)  # the handler has run by now, with the lock still held\n"
        "time.sleep(%r)\n" % (STANDINS, HANG_S), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=2 * HANG_S,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "SIGTERM received. signum=%d" % signal.SIGTERM in done.stdout
    assert re.search(r"Finished server process \[\d+\]", done.stdout)
