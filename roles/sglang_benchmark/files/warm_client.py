"""A warm SGLang benchmark client for bench_runner.py on the controller: one process that has imported the client
(torch and all: ~10 s of CPU each time) and forks a child per measurement, so many measurements, or many hosts
measured at once, pay that import once instead of once each.

The warm process listens on a Unix socket in a directory of the caller's (the client venv), named after what
shapes the import (the Python, the client's release and file, the runner's code, the environment an import reads),
so a changed client or runner never reuses an old one. It leaves when it has been idle for idle_s with no
measurement running. Each child takes the caller's environment (the API key too: sent over the socket, never
written down) and working directory, tells the caller its pid, runs the plan once the caller says go (so no run
starts that the caller could not stop) and says when it is done. When the warm path cannot be used (a
process that will not start or import), the caller is told why and runs the client in a process of its own, as
without it. Standard library only, like bench_runner.py.
"""
import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import signal
import socket
import subprocess
import time

LOCK_NAME = "warm-client.lock"
START_TIMEOUT_S = 300  # the first import, on a loaded controller
POLL_S = 1.0
# What an import reads from the environment (and keeps: changing it later would not reach the warm process).
IMPORT_ENV_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "SGLANG_", "TORCH", "PYTORCH_",
                       "CUDA", "OMP_", "MKL_", "LD_", "PYTHON")
SECRET_ENV = ("OPENAI_API_KEY", "API_KEY")


class Unavailable(Exception):
    """The warm path cannot run this measurement; the message says why."""


def socket_path(directory, identity, env, code_files):
    """The socket of the warm process for IDENTITY (strings: the Python, the client module, its release), the
    import-time part of ENV and the contents of CODE_FILES."""
    digest = hashlib.sha256()
    for part in list(identity) + sorted("%s=%s" % kv for kv in env.items() if kv[0].startswith(IMPORT_ENV_PREFIXES)):
        digest.update(part.encode() + b"\0")
    for name in code_files:
        with open(name, "rb") as handle:
            digest.update(handle.read())
    return os.path.join(directory, "warm-client-%s.sock" % digest.hexdigest()[:12])


@contextlib.contextmanager
def _in_dir(path):
    """In PATH's directory for a moment, so the socket is bound and reached by its bare name: a full path can be
    longer than the 108 bytes an AF_UNIX address holds."""
    before = os.open(".", os.O_RDONLY)
    try:
        os.chdir(os.path.dirname(path))
        yield os.path.basename(path)
    finally:
        os.fchdir(before)
        os.close(before)


def _connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _in_dir(path) as name:
            sock.connect(name)
        return sock
    except OSError:
        sock.close()
        return None


@contextlib.contextmanager
def _locked(directory, blocking=True):
    with open(os.path.join(directory, LOCK_NAME), "a", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def connect_or_start(path, spawn_argv, env):
    """A connection to the warm process at PATH, started (with SPAWN_ARGV + [PATH]) if none listens there."""
    with _locked(os.path.dirname(path)):
        sock = _connect(path)
        if sock:
            return sock
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a warm process that ended without removing it
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        proc = subprocess.Popen(spawn_argv + [path], env={k: v for k, v in env.items() if k not in SECRET_ENV},
                                cwd="/", start_new_session=True, **quiet)  # pylint: disable=consider-using-with
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            sock = _connect(path)
            if sock:
                return sock
            if proc.poll() is not None:
                raise Unavailable("the warm client exited with %s before it listened (its import failed?)"
                                  % proc.returncode)
            time.sleep(0.2)
        proc.kill()
        raise Unavailable("the warm client did not listen within %ds" % START_TIMEOUT_S)


def run(path, spawn_argv, plan, env, timeout):
    """Runs PLAN in a child of the warm process: 'done', 'timed out' (the child was killed) or 'ended' (it died).
    Raises Unavailable when no child took the plan."""
    sock = connect_or_start(path, spawn_argv, env)
    with sock, sock.makefile("rb") as replies:
        sock.settimeout(timeout)
        try:
            sock.sendall(json.dumps({"plan": plan, "env": env, "cwd": os.getcwd()}).encode() + b"\n")
            pid = replies.readline().decode().strip()
        except OSError as exc:
            raise Unavailable("the warm client did not take the measurement: %s" % exc) from exc
        if not pid.isdigit():
            raise Unavailable("the warm client closed the connection before it started the measurement")
        try:
            sock.sendall(b"go\n")  # the child runs nothing before this: only a run whose pid we hold can start
        except OSError as exc:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
            raise Unavailable("the warm client's child went away before the measurement: %s" % exc) from exc
        try:
            return "done" if replies.readline().strip() == b"done" else "ended"
        except socket.timeout:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
            return "timed out"


def _child(conn, run_plan):
    """In the forked child: take the caller's environment and directory, say its pid, and run the plan only when the
    caller answers "go": a caller that gave up before it had the pid (and so could not stop the run) falls back to a
    run of its own, and two measurements must never load the server at once."""
    try:
        with conn.makefile("rb") as requests:
            request = json.loads(requests.readline())
            os.environ.clear()
            os.environ.update(request["env"])
            os.chdir(request["cwd"])
            conn.sendall(b"%d\n" % os.getpid())
            if requests.readline().strip() != b"go":
                return
        run_plan(request["plan"])
        conn.sendall(b"done\n")
    finally:
        os._exit(0)  # pylint: disable=protected-access  # never back into the parent's loop


def _fork(conn, server, run_plan):
    pid = os.fork()
    if pid == 0:
        server.close()
        _child(conn, run_plan)
    conn.close()
    return pid


def _reap(children):
    for pid in list(children):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        children.discard(pid)


def serve(path, module, idle_s, run_plan):
    """The warm process: import MODULE, then fork RUN_PLAN per connection until idle for IDLE_S seconds."""
    importlib.import_module(module)  # what every child shares
    os.umask(0o077)  # the socket: this user only
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with _in_dir(path) as name:
        server.bind(name)
    os.chmod(path, 0o600)
    server.listen(64)
    server.settimeout(POLL_S)
    children, last = set(), time.monotonic()
    while True:
        _reap(children)
        if children:
            last = time.monotonic()
        try:
            conn = server.accept()[0]
        except socket.timeout:
            if children or time.monotonic() - last < idle_s:
                continue
            left, conn = _leave(server, path)
            if left:
                return
            if conn is None:
                continue
        conn.setblocking(True)
        children.add(_fork(conn, server, run_plan))
        last = time.monotonic()


def _leave(server, path):
    """Stops listening, unless a caller holds the lock (it is connecting) or has connected already: then
    (False, its connection or None). The lock is let go before any fork (a child would hold it on)."""
    with _locked(os.path.dirname(path), blocking=False) as held:
        if not held:
            return False, None
        server.setblocking(False)
        try:
            conn = server.accept()[0]  # connected under the lock before we took it
        except BlockingIOError:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return True, None
        server.settimeout(POLL_S)
        return False, conn
