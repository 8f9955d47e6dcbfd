"""Injected faults (config never_healthy, crash_after_s, exit_on_start): each fails as the real server fails,
with SGLang's log lines and exit codes."""
import re
import time

from tests.helpers.sglang_standin import STAMP


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
