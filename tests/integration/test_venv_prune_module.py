"""The sglang_venv_prune module through real Ansible: check mode, diff, removal, idempotence, refusals."""
import os

from tests.helpers.ansible_run import run_module
from tests.unit.test_venv_prune import hold, make_venv


def lab(tmp_path):
    for index, name in enumerate(["lock-a", "lock-b", "lock-c", "lock-d"]):
        make_venv(tmp_path, name, installed=1000 + index * 10)
    (tmp_path / "venvs" / "lock-a" / "payload").write_bytes(b"x" * 50000)
    os.symlink(str(tmp_path / "venvs" / "lock-d"), str(tmp_path / "current"))
    hold(tmp_path / "venvs" / "lock-b", tmp_path / "known-good", tmp_path / "venvs" / "lock-b")
    return tmp_path


def venvs(root):
    return sorted(os.listdir(str(root / "venvs")))


def test_check_mode_reports_and_removes_nothing(tmp_path):
    root = lab(tmp_path)
    result = run_module("sglang_venv_prune", {"root": str(root), "keep": 1}, check=True, diff=True)
    assert result["changed"] and result["removed"] == [str(root / "venvs" / "lock-a"), str(root / "venvs" / "lock-c")]
    assert result["freed_bytes"] >= 50000
    assert result["diff"]["before"] == "lock-a\nlock-b\nlock-c\nlock-d\n"
    assert result["diff"]["after"] == "lock-b\nlock-d\n"
    assert venvs(root) == ["lock-a", "lock-b", "lock-c", "lock-d"]


def test_a_dry_run_before_a_new_lock_says_what_the_real_run_removes(tmp_path):
    # This run installs lock-e and points current at it; the dry run sees neither, and is told the venv.
    root = lab(tmp_path)
    args = {"root": str(root), "keep": 2, "active": str(root / "venvs" / "lock-e")}
    dry = run_module("sglang_venv_prune", args, check=True, diff=True)
    assert dry["removed"] == [str(root / "venvs" / "lock-a"), str(root / "venvs" / "lock-c")], dry
    assert dry["diff"]["before"] == "lock-a\nlock-b\nlock-c\nlock-d\n"  # lock-e is not there yet
    assert dry["diff"]["after"] == "lock-b\nlock-d\nlock-e\n" and venvs(root) == ["lock-a", "lock-b", "lock-c", "lock-d"]
    make_venv(root, "lock-e", installed=2000)  # the install and the switch, as the real run makes them
    os.remove(str(root / "current"))
    os.symlink(str(root / "venvs" / "lock-e"), str(root / "current"))
    real = run_module("sglang_venv_prune", args)
    assert real["removed"] == dry["removed"] and venvs(root) == ["lock-b", "lock-d", "lock-e"], real


def test_removes_what_nothing_needs_then_changes_nothing(tmp_path):
    root = lab(tmp_path)
    first = run_module("sglang_venv_prune", {"root": str(root), "keep": 1})
    assert first["changed"] and venvs(root) == ["lock-b", "lock-d"], first
    assert first["kept"]["lock-b"].startswith("held by the saved state")
    assert first["kept"]["lock-d"] == "active (current points at it)"
    again = run_module("sglang_venv_prune", {"root": str(root), "keep": 1})
    assert not again["changed"] and again["removed"] == [], again


def test_default_keeps_three(tmp_path):
    root = lab(tmp_path)
    result = run_module("sglang_venv_prune", {"root": str(root)})
    assert venvs(root) == ["lock-b", "lock-c", "lock-d"], result


def test_keep_zero_is_refused_before_anything_is_touched(tmp_path):
    root = lab(tmp_path)
    result = run_module("sglang_venv_prune", {"root": str(root), "keep": 0})
    assert result["failed"] and "keep must be 1 or more" in result["msg"], result
    assert venvs(root) == ["lock-a", "lock-b", "lock-c", "lock-d"]
