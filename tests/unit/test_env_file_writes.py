"""module_utils/env_file.py's writes: never through a symlink, never over an edit made after plan() read the file."""
import grp
import os
import pwd
import stat

import pytest

from ansible.module_utils import env_file as ef
from tests.helpers.ansible_run import run_module

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name
OLD, NEW = "A=1\n", "A=2\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim"
    path.write_text("root's own file\n")
    os.chmod(str(path), 0o600)
    return path


def test_a_symlinked_env_file_is_refused_naming_it_and_its_target_untouched(tmp_path, victim):
    dest = tmp_path / "runtime.env"
    os.symlink(str(victim), str(dest))
    for mode in ("0600", "0644"):  # content and mode differ; the mode alone differs
        with pytest.raises(ef.EnvFileError, match=r"runtime.env is a symlink \(to .*victim\)"):
            ef.plan(str(dest), NEW, ME, MY_GROUP, mode)
    result = run_module("sglang_env_file", {"dest": str(dest), "content": NEW, "owner": ME, "group": MY_GROUP})
    assert result.get("failed") and "is a symlink (to %s)" % victim in result["msg"], result
    assert os.path.islink(str(dest)) and victim.read_text() == "root's own file\n"
    assert stat.S_IMODE(os.stat(str(victim)).st_mode) == 0o600


def test_an_edit_after_the_plan_is_kept_and_named(tmp_path):
    dest = tmp_path / "runtime.env"
    dest.write_text(OLD)
    change = ef.plan(str(dest), NEW, ME, MY_GROUP, "0644")
    dest.write_text("A=3\n")  # another writer, between the read and the rename
    with pytest.raises(ef.EnvFileError, match=r"runtime.env changed after it was read .*nothing was changed"):
        ef.apply(str(dest), NEW, ME, MY_GROUP, change)
    assert dest.read_text() == "A=3\n"
    assert [n for n in os.listdir(str(tmp_path)) if n != "runtime.env"] == []  # no temporary file left


def test_a_file_created_or_swapped_for_a_link_after_the_plan_is_left_alone(tmp_path, victim):
    dest = tmp_path / "runtime.env"
    change = ef.plan(str(dest), NEW, ME, MY_GROUP, "0644")  # nothing there yet
    dest.write_text("A=3\n")
    with pytest.raises(ef.EnvFileError, match="runtime.env appeared after it was read"):
        ef.apply(str(dest), NEW, ME, MY_GROUP, change)
    assert dest.read_text() == "A=3\n"
    dest.write_text(NEW)
    os.chmod(str(dest), 0o600)
    change = ef.plan(str(dest), NEW, ME, MY_GROUP, "0644")  # the mode alone
    assert change["attributes"] and not change["content"]
    os.unlink(str(dest))
    os.symlink(str(victim), str(dest))
    with pytest.raises(ef.EnvFileError, match=r"runtime.env is a symlink \(to .*victim\): its owner and mode were "
                                              r"not set, nor its target's"):
        ef.apply(str(dest), NEW, ME, MY_GROUP, change)
    assert stat.S_IMODE(os.stat(str(victim)).st_mode) == 0o600 and os.path.islink(str(dest))
