"""The stand-in's log lines: SGLang's and uvicorn's formats on stdout (the journal), and how it exits.

One lock keeps lines whole across threads; a signal handler must never log here itself (see lifecycle.on_sigterm).
"""
import datetime
import os
import sys
import threading

_log_lock = threading.Lock()


def _stamp():
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def emit(line):
    with _log_lock:
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):  # stdout gone (journald restarted, a reader closed the pipe): keep serving
            pass


def log(message, prefix=""):
    """sglang's format (utils/common.py configure_logger): [%(asctime)s{prefix}] %(message)s."""
    emit("[%s%s] %s" % (_stamp(), prefix, message))


def ulog(message, level="INFO"):
    """uvicorn's format as sglang configures it: [%(asctime)s] %(levelprefix)s %(message)s (no colours: not a tty)."""
    emit("[%s] %s %s" % (_stamp(), level + ":" + " " * (8 - len(level)), message))


def standin_note(message):
    log("sglang STAND-IN: " + message)


def die(code, message=None):
    if message:
        emit(message)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def tp_prefix(server, rank):
    """scheduler.py's logger prefix: ' TP{rank}' only when tp_size > 1 (no DP/PP/EP here)."""
    return " TP%d" % rank if server.args.tp_size > 1 else ""
