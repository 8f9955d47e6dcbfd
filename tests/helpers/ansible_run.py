"""Run one module through real Ansible (ad-hoc, local connection) and return its result."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The ansible next to this interpreter (.venv/bin), so `.venv/bin/python -m pytest` works without PATH set.
_NEXT_TO_PYTHON = os.path.join(os.path.dirname(sys.executable), "ansible")
ANSIBLE = _NEXT_TO_PYTHON if os.access(_NEXT_TO_PYTHON, os.X_OK) else "ansible"


def run_module(module, args, check=False, diff=False, env=None, extra_vars=None):
    """The module's result on localhost; env adds variables (the module inherits them, local connection),
    extra_vars are given with -e."""
    env = dict(os.environ, **(env or {}))
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cmd = [ANSIBLE, "localhost", "-c", "local", "-m", module, "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("ansible printed no JSON (rc %s):\n%s\n%s" % (proc.returncode, proc.stdout,
                                                                         proc.stderr))
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]


_DIRECT = """
import runpy, sys
import ansible.module_utils
ansible.module_utils.__path__.append(sys.argv[3])
path = sys.argv[1]
sys.argv = [path, sys.argv[2]]
runpy.run_path(path, run_name="__main__")
"""


def run_module_direct(module, args, tmp_path):
    """The module's result when run as Ansible runs it on a host: its own process, reading an arguments file, with
    this checkout's module_utils; for arguments the controller itself refuses to pass (a lone surrogate: "Refusing
    to deserialize an invalid UTF8 string value", before any module runs). Returns (result, stderr)."""
    args_file = os.path.join(str(tmp_path), "module-args.json")
    with open(args_file, "w", encoding="ascii") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)  # ensure_ascii: a lone surrogate as its \u escape
    proc = subprocess.run([sys.executable, "-c", _DIRECT, os.path.join(REPO, "library", module + ".py"), args_file,
                           os.path.join(REPO, "module_utils")], cwd=str(tmp_path), capture_output=True, text=True,
                          check=False)
    try:
        return json.loads(proc.stdout), proc.stderr
    except ValueError:
        raise AssertionError("%s printed no JSON (rc %s):\n%s\n%s" % (module, proc.returncode, proc.stdout,
                                                                       proc.stderr))


def run_playbook(playbook, extra_vars=None, env=None, check=False, inventory=None, limit=None, project=REPO):
    """Run a playbook in PROJECT (a checkout, or a copy of one); returns (rc, report) where report is the
    ansible.posix.json callback's output."""
    env = dict(os.environ, **(env or {}))
    env.update(ANSIBLE_CONFIG=os.path.join(project, "ansible.cfg"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cmd = [ANSIBLE + "-playbook", playbook, "-e", json.dumps(extra_vars or {})]
    if inventory:
        cmd += ["-i", inventory]
    if limit:
        cmd += ["-l", limit]
    if check:
        cmd.append("--check")
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, check=False)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("ansible-playbook printed no JSON (rc %s):\n%s\n%s" % (
            proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))


def refusal(result):
    """The message of a module's refusal: it failed, with its own message, never with a traceback."""
    assert result.get("failed"), result
    assert "Traceback" not in result.get("msg", "") and "module_stderr" not in result, result
    return result["msg"]


def task_results(report, host="localhost"):
    """[(task name without its 'role : ' prefix, result)] in order, for one host."""
    return [(task["task"]["name"].split(" : ", 1)[-1], task["hosts"][host])
            for play in report["plays"] for task in play["tasks"] if host in task["hosts"]]


def failure(report, host="localhost"):
    """(task name, msg) of the first failed task, or None."""
    for name, result in task_results(report, host):
        if result.get("failed") and not result.get("ignore_errors"):
            items = [item.get("msg", "") for item in result.get("results", []) if item.get("failed")]
            return name, " | ".join(items) or result.get("msg", "")
    return None


def module_doc(module):
    """ansible-doc --json of one of the project's modules (library/): what a user reads, parsed."""
    doc = os.path.join(os.path.dirname(ANSIBLE), "ansible-doc") if os.path.isabs(ANSIBLE) else "ansible-doc"
    proc = subprocess.run([doc, "--json", "-M", os.path.join(REPO, "library"), module], cwd=REPO,
                          env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg")),
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)[module]
