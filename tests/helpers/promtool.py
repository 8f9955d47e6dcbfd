"""Debian's real promtool (package `prometheus`, installed by lab/install-host-deps.sh), for the metrics tests.

A missing promtool fails the test with what to install: the textfiles and alert rules are checked by the real tool
or not at all, and a silent skip would let CI pass without checking them.
"""
import shutil
import subprocess

import pytest

INSTALL_HINT = ("promtool is not on PATH: install Debian's prometheus package (./lab/install-host-deps.sh as root, "
                "or apt-get install prometheus); the metrics tests check with the real tool, never without it")


def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(INSTALL_HINT)
    return path


def run(*args, stdin=None, cwd=None):
    """promtool ARGS...: the CompletedProcess (text), never raising on a non-zero exit."""
    return subprocess.run([promtool(), *args], input=stdin, cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=False)


def check_metrics(text):
    """(rc, output) of `promtool check metrics` on TEXT: rc 0 with no output is a clean textfile."""
    result = run("check", "metrics", stdin=text)
    return result.returncode, (result.stdout + result.stderr).strip()
