"""Start a server the way systemd would from a rendered unit, on a host whose PID 1 is not systemd.

Reads User=, Group=, WorkingDirectory=, EnvironmentFile= (a leading '-' tolerates a missing file) and ExecStart=
from the unit's [Service] section: nothing is retyped. The environment is what systemd would give the service
(its default PATH, LANG, the environment files) plus, named in the result, variables of this machine the unit
cannot know about (where its CUDA driver libraries are) and the multicast-off settings this shared machine
requires. The process gets its own session (setsid), so it outlives the command that started it.
"""
import os
import pwd
import grp
import shlex
import signal
import subprocess
import time

SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASS_THROUGH = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
MULTICAST_OFF_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multicast-off.env")


def parse_unit(text):
    """{'User', 'Group', 'WorkingDirectory', 'EnvironmentFile': [...], 'ExecStart': [...], 'TimeoutStopSec'} of
    [Service] (TimeoutStopSec in seconds, as the role writes it)."""
    unit, section = {"EnvironmentFile": []}, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key == "EnvironmentFile":
            unit["EnvironmentFile"].append(value)
        elif key == "ExecStart":
            unit["ExecStart"] = shlex.split(value)
        elif key in ("User", "Group", "WorkingDirectory"):
            unit[key] = value
        elif key == "TimeoutStopSec":
            unit[key] = int(value)
    missing = [key for key in ("User", "WorkingDirectory", "ExecStart") if key not in unit]
    if missing:
        raise ValueError("unit has no %s in [Service]" % ", ".join(missing))
    return unit


def read_env_file(path):
    """KEY=VALUE lines as systemd reads them (comments, blank lines, optional quotes)."""
    env = {}
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            line = raw.strip()
            if not line or line.startswith(("#", ";")) or "=" not in line:
                continue
            key, value = line.split("=", 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[key.strip()] = value
    return env


# NVLink multicast stays off on this machine, whatever a unit says (it can take the host's GPUs down).
MULTICAST_OFF = read_env_file(MULTICAST_OFF_FILE)


def service_env(unit, extra=None, host_env=None):
    host_env = os.environ if host_env is None else host_env
    env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8"}
    passed = {k: host_env[k] for k in PASS_THROUGH if k in host_env}
    env.update(passed)
    for entry in unit["EnvironmentFile"]:
        optional, path = entry.startswith("-"), entry.lstrip("-")
        if optional and not os.path.exists(path):
            continue
        env.update(read_env_file(path))
    env.update(extra or {})
    env.update(MULTICAST_OFF)
    return env, sorted(passed)


def as_service(unit_path, extra_env=None):
    """What a process of this unit gets from systemd: the parsed unit, its environment, the host variables passed
    and the Popen keywords (cwd, env, user, group, no supplementary groups)."""
    with open(unit_path, encoding="utf-8") as handle:
        unit = parse_unit(handle.read())
    env, passed = service_env(unit, extra_env)
    user = pwd.getpwnam(unit["User"])
    group = grp.getgrnam(unit["Group"]).gr_gid if unit.get("Group") else user.pw_gid
    popen = {"cwd": unit["WorkingDirectory"], "env": env, "user": user.pw_uid, "group": group, "extra_groups": []}
    return unit, passed, popen


def start(unit_path, log_path, extra_env=None, extra_args=()):
    """Start the unit's ExecStart as systemd would; EXTRA_ARGS (a test bed's, e.g. a shared-GPU rehearsal's) are
    appended to it and recorded apart from the unit's own."""
    unit, passed, popen = as_service(unit_path, extra_env)
    log = open(log_path, "ab")  # pylint: disable=consider-using-with
    proc = subprocess.Popen(unit["ExecStart"] + list(extra_args), stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, **popen)
    return {"pid": proc.pid, "argv": unit["ExecStart"], "appended_args": list(extra_args), "user": unit["User"],
            "cwd": unit["WorkingDirectory"],
            "environment_files": unit["EnvironmentFile"], "passed_from_host": passed,
            "added": sorted(set(extra_env or {}) | set(MULTICAST_OFF)), "log": log_path,
            "timeout_stop_s": unit.get("TimeoutStopSec", 90)}  # systemd's default without the key


def _stat_fields(pid):
    """/proc/PID/stat after the command name: state, ppid, pgrp, ...; None when the process is gone."""
    try:
        with open("/proc/%s/stat" % pid, encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_gone(pid):
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def group_alive(pgid):
    """Whether a process of the group still runs. A zombie does not: the server's main process is this script's
    child, and nothing reaps it while this script runs (systemd would), so killpg(pgid, 0) alone still finds it."""
    for entry in os.listdir("/proc"):
        fields = _stat_fields(entry) if entry.isdigit() else None
        if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # started by an earlier call: not this process's child


def stop(pid, grace_s=60, poll_s=0.5, kill_wait_s=30):
    """Stop the whole process group as systemd does (KillMode=control-group): TERM, then KILL after grace_s.
    {"result": "terminated" | "killed" | "gone" | "unkillable" (still there kill_wait_s after the KILL),
    "seconds": from TERM until no process of the group ran}."""
    started = time.monotonic()
    if not group_alive(pid):  # nothing but unreaped zombies, if anything
        _reap(pid)
        return {"result": "gone", "seconds": 0.0}
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return {"result": "gone", "seconds": 0.0}
    result = "terminated"
    while group_alive(pid):
        waited = time.monotonic() - started
        if result == "terminated" and waited >= grace_s:
            result = "killed"
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                break
        elif result == "killed" and waited >= grace_s + kill_wait_s:
            result = "unkillable"
            break
        time.sleep(poll_s)
        _reap(pid)
    _reap(pid)
    return {"result": result, "seconds": round(time.monotonic() - started, 1)}
