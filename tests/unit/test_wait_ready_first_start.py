"""The server role's readiness wait (roles/sglang_server/files/wait_ready.py) on a first start that compiles: the
lab's stand-in told to compile (first_start_compile_s: a kernel a second into $HOME/.triton/cache, as Triton
fills it) is waited for past the timeout while it compiles, not given up; a start that neither answers nor compiles
is given up at the timeout; a compiler among the server's processes counts as compiling."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys

from tests.helpers.sglang_standin import REPO

WAIT_READY = os.path.join(REPO, "roles", "sglang_server", "files", "wait_ready.py")


def load_wait_ready():
    spec = importlib.util.spec_from_file_location("wait_ready", WAIT_READY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wait(server, *extra, timeout=1.0):
    proc = subprocess.run([sys.executable, WAIT_READY, "--url", "http://127.0.0.1:%d/health_generate" % server.port,
                           "--pid", str(server.proc.pid), "--timeout", str(timeout), "--poll", "0.2"] + list(extra),
                          capture_output=True, text=True, check=False, timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def compiling_standin(standin, home, seconds=4, **config):
    return standin(dict({"first_start_compile_s": seconds}, **config), env={"HOME": str(home)})


def test_a_first_start_that_compiles_past_the_timeout_is_waited_for(standin, tmp_path):
    home = tmp_path / "home"
    server = compiling_standin(standin, home).start()
    rc, result = wait(server, "--compile-dir", str(home / ".triton"), "--compile-grace", "3", "--max-timeout", "60")
    assert (rc, result["ready"]) == (0, True), result
    assert result["compiling"].startswith("a compile cache written")
    assert (home / ".triton" / "cache" / "standin-compiled").exists()


def test_without_compile_dirs_the_same_start_is_given_up_at_the_timeout(standin, tmp_path):
    server = compiling_standin(standin, tmp_path / "home", seconds=30).start()
    rc, result = wait(server)
    assert (rc, result["ready"], result["compiling"]) == (1, False, None)
    assert result["reason"].startswith("no 200 from http://127.0.0.1:%d/health_generate within" % server.port)


def test_a_later_start_finds_the_caches_full_and_is_ready_without_waiting_on_compiles(standin, tmp_path):
    home = tmp_path / "home"
    first = compiling_standin(standin, home, seconds=2).start().wait_ready(timeout=60)
    first.proc.terminate()
    first.exit_code()
    kernels = sorted(os.listdir(home / ".triton" / "cache"))
    second = compiling_standin(standin, home, seconds=30).start()
    rc, result = wait(second, "--compile-dir", str(home / ".triton"), "--compile-grace", "3", "--max-timeout", "60",
                      timeout=20)
    assert (rc, result["compiling"]) == (0, None), result
    assert sorted(os.listdir(home / ".triton" / "cache")) == kernels  # nothing compiled again


def test_a_start_that_neither_answers_nor_compiles_is_given_up_at_the_timeout(standin, tmp_path):
    home = tmp_path / "home"
    (home / ".triton" / "cache").mkdir(parents=True)
    os.utime(home / ".triton" / "cache", (1, 1))  # written long ago
    server = standin({"never_healthy": True}, env={"HOME": str(home)}).start()
    rc, result = wait(server, "--compile-dir", str(home / ".triton"), "--compile-grace", "3", "--max-timeout", "60")
    assert (rc, result["ready"], result["compiling"]) == (1, False, None)
    assert "and no compiling in the last 3 s" in result["reason"]


def test_a_compiler_among_the_servers_processes_counts_as_compiling(tmp_path):
    wait_ready = load_wait_ready()
    ninja = tmp_path / "ninja"
    shutil.copy(shutil.which("sleep"), ninja)  # a process named as FlashInfer's JIT runs it
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.run([sys.argv[1], '30'])",
                               str(ninja)])
    try:
        for _ in range(200):
            if "ninja" in wait_ready.children(parent.pid).values():
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert wait_ready.compiling(parent.pid, [], 3) == "ninja running under pid %d" % parent.pid
        plain = subprocess.Popen(["sleep", "30"])
        try:  # no compiler under it, no cache folder
            assert wait_ready.compiling(plain.pid, [str(tmp_path / "none")], 3) is None
        finally:
            plain.kill()
            plain.wait()
    finally:
        parent.kill()
        parent.wait()
        subprocess.run(["pkill", "-f", str(ninja)], check=False)
