"""module_utils/path_state.py and library/sglang_paths.py: a layout of directories and absent files in one run."""
import grp
import os
import pwd
import stat

import pytest

from ansible.module_utils import path_state as ps
from tests.helpers.ansible_run import run_module

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def entry(path, mode="0750", owner=ME, group=MY_GROUP):
    return {"path": str(path), "owner": owner, "group": group, "mode": mode}


def test_plans_then_creates_missing_directories_with_their_parents(tmp_path):
    wanted = [entry(tmp_path / "a" / "b"), entry(tmp_path / "c", "0755")]
    changes, parsed = ps.plan(wanted, [])
    assert [(os.path.basename(p), a) for p, a, _d in changes] == [("b", "create"), ("c", "create")]
    assert not (tmp_path / "a").exists()  # planning reads only
    ps.apply(changes, parsed)
    assert stat.S_IMODE(os.stat(str(tmp_path / "a" / "b")).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(str(tmp_path / "c")).st_mode) == 0o755
    assert ps.plan(wanted, [])[0] == []  # the second run changes nothing


def test_a_wrong_mode_is_planned_and_fixed(tmp_path):
    target = tmp_path / "d"
    target.mkdir(mode=0o777)
    os.chmod(str(target), 0o777)
    changes, parsed = ps.plan([entry(target)], [])
    assert changes == [(str(target), "mode", "0777 -> 0750")]
    ps.apply(changes, parsed)
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o750


def test_an_unknown_owner_is_a_planned_change_and_a_clear_failure_when_applied(tmp_path):
    target = tmp_path / "d"
    target.mkdir()
    os.chmod(str(target), 0o750)
    changes, parsed = ps.plan([entry(target, owner="no-such-user-here")], [])
    assert [a for _p, a, _d in changes] == ["owner"]  # a dry run before the user exists says so, without failing
    with pytest.raises(ps.PathError, match="owner no-such-user-here or group .* does not exist"):
        ps.apply(changes, parsed)


def test_absent_removes_files_and_symlinks_never_directories(tmp_path):
    (tmp_path / "key.env").write_text("SECRET=x\n")
    os.symlink(str(tmp_path / "nowhere"), str(tmp_path / "link"))
    (tmp_path / "dir").mkdir()
    changes, parsed = ps.plan([], [str(tmp_path / "key.env"), str(tmp_path / "link"), str(tmp_path / "gone")])
    assert [(os.path.basename(p), a) for p, a, _d in changes] == [("key.env", "remove"), ("link", "remove")]
    ps.apply(changes, parsed)
    assert not os.path.lexists(str(tmp_path / "key.env")) and not os.path.lexists(str(tmp_path / "link"))
    with pytest.raises(ps.PathError, match="is a directory"):
        ps.plan([], [str(tmp_path / "dir")])


@pytest.mark.parametrize("directories,absent,needle", [
    ([{"path": "relative/dir", "owner": "root", "group": "root", "mode": "0755"}], [], "absolute"),
    ([{"path": "/opt/../etc", "owner": "root", "group": "root", "mode": "0755"}], [], "normalized"),
    ([{"path": "/opt/x", "owner": "root", "group": "root", "mode": "rwx"}], [], "octal"),
    ([{"path": "/opt/x", "owner": "root", "group": "root", "mode": "17777"}], [], "octal"),
    ([{"path": "/opt/x", "owner": "root", "mode": "0755"}], [], "exactly path, owner, group and mode"),
    ([], ["/"], "not /"),
])
def test_bad_requests_are_refused_before_anything_changes(directories, absent, needle):
    with pytest.raises(ps.PathError, match=needle):
        ps.plan(directories, absent)


def test_a_file_where_a_directory_belongs_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ps.PathError, match="exists and is not a directory"):
        ps.plan([entry(tmp_path / "f")], [])


def test_the_module_check_diff_apply_and_idempotence(tmp_path):
    args = {"directories": [entry(tmp_path / "root" / "venvs", "0755")], "absent": [str(tmp_path / "old.env")]}
    (tmp_path / "old.env").write_text("x\n")
    dry = run_module("sglang_paths", args, check=True, diff=True)
    assert dry["changed"] and not (tmp_path / "root").exists() and (tmp_path / "old.env").exists()
    assert [c["action"] for c in dry["changes"]] == ["create", "remove"]
    assert "old.env: remove" in dry["diff"][0]["after"]
    real = run_module("sglang_paths", args)
    assert real["changed"] and (tmp_path / "root" / "venvs").is_dir() and not (tmp_path / "old.env").exists()
    again = run_module("sglang_paths", args)
    assert again["changed"] is False and again["changes"] == []


def test_the_module_answers_bad_input_with_its_own_message(tmp_path):
    (tmp_path / "dir").mkdir()
    result = run_module("sglang_paths", {"absent": [str(tmp_path / "dir")]})
    assert result.get("failed") and result["msg"].startswith("sglang_paths: ") and "is a directory" in result["msg"]
    assert "Traceback" not in result["msg"]


def test_a_symlink_where_a_directory_belongs_is_refused_and_its_target_keeps_its_owner_and_mode(tmp_path):
    """A link the service user could plant in a directory it owns must not make root chown and chmod its target."""
    target = tmp_path / "etc-like"
    target.mkdir()
    os.chmod(str(target), 0o700)
    os.symlink(str(target), str(tmp_path / "workspace"))
    with pytest.raises(ps.PathError, match=r"workspace is a symlink \(to .*etc-like\).*real directory"):
        ps.plan([entry(tmp_path / "workspace", "0777")], [])
    result = run_module("sglang_paths", {"directories": [entry(tmp_path / "workspace", "0777")]})
    assert result.get("failed") and "workspace is a symlink" in result["msg"], result
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o700


def test_a_directory_swapped_for_a_link_after_the_plan_is_refused(tmp_path):
    target, managed = tmp_path / "target", tmp_path / "managed"
    target.mkdir()
    os.chmod(str(target), 0o700)
    managed.mkdir()
    os.chmod(str(managed), 0o777)
    changes, parsed = ps.plan([entry(managed, "0755")], [])
    managed.rmdir()
    os.symlink(str(target), str(managed))
    with pytest.raises(ps.PathError, match=r"managed is a symlink \(to .*target\): its owner and mode were not set"):
        ps.apply(changes, parsed)
    assert stat.S_IMODE(os.stat(str(target)).st_mode) == 0o700
