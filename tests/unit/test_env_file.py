"""module_utils/env_file.py and library/sglang_env_file.py: an EnvironmentFile read by systemd as written."""
import grp
import os
import pwd
import stat

import pytest

from ansible.module_utils import env_file as ef
from tests.helpers.ansible_run import run_module

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name
GOOD = "#\n# Ansible managed\n#\n; also a comment\n\nHF_HUB_OFFLINE=1\nPATH=/opt/sglang/current/bin:/usr/bin\n"


def test_comments_blank_lines_and_plain_assignments_pass():
    assert ef.problems(GOOD) == []


@pytest.mark.parametrize("line,needle", [
    ("NCCL_ALGO=$(reboot)", "environment expansion"),
    ("HOME=/var/lib/%i", "systemd specifier"),
    ("OPTS=--a --b", "whitespace"),
    ("OPTS=\"quoted\"", "quote"),
    ("2BAD=1", "not an environment variable name"),
    ("just words", "neither a comment nor NAME=VALUE"),
    ("# comment with a \x1b escape", "control character"),
    ("A=2", "sets A again (line 1 set it first); systemd would keep the last"),
])
def test_lines_systemd_would_read_differently_are_named(line, needle):
    found = ef.problems("A=1\n" + line + "\n")
    assert len(found) == 1 and found[0].startswith("line 2") and needle in found[0], found


def test_plan_apply_and_idempotence(tmp_path):
    dest = str(tmp_path / "runtime.env")
    change = ef.plan(dest, GOOD, ME, MY_GROUP, "0640")
    assert change["content"] and change["before"] is None and not os.path.exists(dest)
    ef.apply(dest, GOOD, ME, MY_GROUP, change)
    assert open(dest).read() == GOOD and stat.S_IMODE(os.stat(dest).st_mode) == 0o640
    again = ef.plan(dest, GOOD, ME, MY_GROUP, "0640")
    assert not again["content"] and not again["attributes"]
    os.chmod(dest, 0o666)
    loose = ef.plan(dest, GOOD, ME, MY_GROUP, "0640")
    assert not loose["content"] and loose["attributes"]
    ef.apply(dest, GOOD, ME, MY_GROUP, loose)
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o640
    assert [name for name in os.listdir(str(tmp_path)) if name != "runtime.env"] == []  # no temporary file left


def test_refusals_write_nothing(tmp_path):
    dest = str(tmp_path / "x.env")
    with pytest.raises(ef.EnvFileError, match="refused, nothing written: line 1"):
        ef.plan(dest, "A=$B\n", ME, MY_GROUP, "0644")
    with pytest.raises(ef.EnvFileError, match="absolute"):
        ef.plan("etc/x.env", "A=1\n", ME, MY_GROUP, "0644")
    for where, rule in ((dest + "\x00", "NUL byte"), (dest + "\nB=1", "newline")):
        with pytest.raises(ef.EnvFileError, match=rule):
            ef.plan(where, "A=1\n", ME, MY_GROUP, "0644")
    with pytest.raises(ef.EnvFileError, match="octal"):
        ef.plan(dest, "A=1\n", ME, MY_GROUP, "rw-r--r--")
    os.mkdir(dest)
    with pytest.raises(ef.EnvFileError, match="not a regular file"):
        ef.plan(dest, "A=1\n", ME, MY_GROUP, "0644")
    change = ef.plan(str(tmp_path / "y.env"), "A=1\n", "no-such-user-here", MY_GROUP, "0644")
    with pytest.raises(ef.EnvFileError, match="does not exist on this host"):
        ef.apply(str(tmp_path / "y.env"), "A=1\n", "no-such-user-here", MY_GROUP, change)
    assert not os.path.exists(str(tmp_path / "y.env"))


def test_the_module_check_diff_and_write(tmp_path):
    dest = tmp_path / "path.env"
    dest.write_text("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=0\n")
    os.chmod(str(dest), 0o644)
    args = {"dest": str(dest), "content": "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1\n", "owner": ME, "group": MY_GROUP}
    dry = run_module("sglang_env_file", args, check=True, diff=True)
    assert dry["changed"] and dry["content_changed"] and dest.read_text().endswith("=0\n")
    assert dry["diff"]["before"].endswith("=0\n") and dry["diff"]["after"].endswith("=1\n")
    assert run_module("sglang_env_file", args)["changed"] and dest.read_text().endswith("=1\n")
    assert run_module("sglang_env_file", args)["changed"] is False
    os.chmod(str(dest), 0o666)  # a mode-only change is shown too, not a changed result without a diff
    dry = run_module("sglang_env_file", args, check=True, diff=True)
    assert dry["changed"] and not dry["content_changed"] and "mode 0644" in dry["diff"]["after"]


def test_the_module_names_the_refused_line(tmp_path):
    result = run_module("sglang_env_file", {"dest": str(tmp_path / "a.env"), "content": "A=1\nB=x y\n"})
    assert result.get("failed") and "line 2 (B)" in result["msg"] and "whitespace" in result["msg"]
    assert "Traceback" not in result["msg"] and not (tmp_path / "a.env").exists()


# Issue 35: a layout path holding a line break adds a line every check passes on its own.
INJECTED = "HOME=/var/lib/sglang\nLD_PRELOAD=/tmp/x.so\nPATH=/usr/bin\n"


def test_a_line_setting_a_variable_the_writer_does_not_set_is_refused():
    assert ef.problems(INJECTED) == []  # each line is a valid assignment: only the names tell
    found = ef.problems(INJECTED, names=["HOME", "PATH"])
    assert found == ["line 2 (LD_PRELOAD) sets LD_PRELOAD, which is not among the variables this file sets (HOME, "
                     "PATH): a value holding a line break would write such a line"]


def test_names_must_be_a_list_of_names():
    assert "names must be a list" in ef.problems("A=1\n", names="A")[0]
    assert "names must be a list" in ef.problems("A=1\n", names=["A", 1])[0]


@pytest.mark.parametrize("line,needle", [
    ("\u00a0# looks like a comment to Python", "neither a comment nor NAME=VALUE"),
    ("\u3000", "neither a comment nor NAME=VALUE"),
    ("\u2003A=1", "not an environment variable name"),
])
def test_a_line_python_strips_but_systemd_does_not_is_checked_as_a_setting(line, needle):
    found = ef.problems(line + "\n")
    assert len(found) == 1 and found[0].startswith("line 1") and needle in found[0], found


def test_a_lone_surrogate_in_content_is_refused_by_line():
    found = ef.problems("A=1\nB=x\udc80\n# c\ud800\n")
    assert [f.split(":")[0] for f in found] == ["line 2 (B) holds a lone surrogate (U+DC80)",
                                               "line 3"], found
