"""Run one module through real Ansible (ad-hoc, local connection) and return its result."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The ansible next to this interpreter (.venv/bin), so `.venv/bin/python -m pytest` works without PATH set.
_NEXT_TO_PYTHON = os.path.join(os.path.dirname(sys.executable), "ansible")
ANSIBLE = _NEXT_TO_PYTHON if os.access(_NEXT_TO_PYTHON, os.X_OK) else "ansible"


def run_module(module, args, check=False, diff=False, env=None):
    """The module's result on localhost; env adds variables (the module inherits them, local connection)."""
    env = dict(os.environ, **(env or {}))
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    cmd = [ANSIBLE, "localhost", "-c", "local", "-m", module, "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("ansible printed no JSON (rc %s):\n%s\n%s" % (proc.returncode, proc.stdout,
                                                                         proc.stderr))
    return report["plays"][0]["tasks"][0]["hosts"]["localhost"]
