"""module_utils/venv_prune.py: which lock venvs go, which stay and why, and removal without a half venv."""
import json
import os

import pytest

from ansible.module_utils import venv_prune as vp


def make_venv(root, name, installed=None, complete=True):
    path = root / "venvs" / name
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("#!/bin/sh\n")
    if complete:
        marker = path / vp.COMPLETE
        marker.write_text("sha\n")
        os.utime(str(marker), (installed, installed))
    return path


def hold(venv, state_dir, target):
    """A saved state (as module_utils/server_state.py writes it) naming target, and venv's hold file naming that state."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "state.json").write_text(json.dumps({"link": {"path": "/opt/sglang/current",
                                                               "target": str(target)}}))
    (venv / vp.KEEP_DIR).mkdir(exist_ok=True)
    (venv / vp.KEEP_DIR / "known-good.json").write_text(json.dumps({"state": str(state_dir / "state.json")}))


@pytest.fixture
def root(tmp_path):
    for index, name in enumerate(["lock-a", "lock-b", "lock-c", "lock-d", "lock-e"]):
        make_venv(tmp_path, name, installed=1000 + index * 10)
    os.symlink(str(tmp_path / "venvs" / "lock-b"), str(tmp_path / "current"))
    return tmp_path


def test_keeps_the_active_and_the_newest_and_removes_the_rest(root):
    kept, remove = vp.plan(vp.scan(str(root)), keep=2)
    assert kept == {"lock-b": "active (current points at it)", "lock-e": "one of the 2 most recently installed",
                    "lock-d": "one of the 2 most recently installed"}
    assert remove == ["lock-a", "lock-c"]


def test_the_active_venv_counts_among_the_newest(root):
    os.remove(str(root / "current"))
    os.symlink(str(root / "venvs" / "lock-e"), str(root / "current"))
    kept, remove = vp.plan(vp.scan(str(root)), keep=1)
    assert list(kept) == ["lock-e"] and remove == ["lock-a", "lock-b", "lock-c", "lock-d"]


def test_a_venv_held_by_a_saved_state_stays_while_the_state_names_it(root, tmp_path):
    hold(root / "venvs" / "lock-a", tmp_path / "known-good", root / "venvs" / "lock-a")
    kept, remove = vp.plan(vp.scan(str(root)), keep=1)
    assert kept["lock-a"] == "held by the saved state %s" % (tmp_path / "known-good" / "state.json")
    assert "lock-a" not in remove


def test_a_stale_hold_holds_nothing(root, tmp_path):
    # The known-good state was saved again since, naming another venv: lock-a's hold is stale.
    hold(root / "venvs" / "lock-a", tmp_path / "known-good", root / "venvs" / "lock-e")
    (root / "venvs" / "lock-c" / vp.KEEP_DIR).mkdir()
    (root / "venvs" / "lock-c" / vp.KEEP_DIR / "gone.json").write_text(json.dumps({"state": "/nonexistent.json"}))
    found = vp.scan(str(root))
    kept, remove = vp.plan(found, keep=1)
    assert "lock-a" in remove and "lock-c" in remove
    assert sorted(os.path.basename(path) for venv in found["venvs"] for path in venv["stale"]) == \
        ["gone.json", "known-good.json"]


def test_incomplete_venvs_are_left_alone(root):
    make_venv(root, "lock-f", complete=False)
    kept, remove = vp.plan(vp.scan(str(root)), keep=1)
    assert kept["lock-f"].startswith("incomplete") and "lock-f" not in remove


def test_without_current_nothing_is_removed(root):
    os.remove(str(root / "current"))
    kept, remove = vp.plan(vp.scan(str(root)), keep=1)
    assert remove == [] and len(kept) == 5


def test_keep_below_one_is_refused(root):
    with pytest.raises(ValueError):
        vp.plan(vp.scan(str(root)), keep=0)


def test_remove_renames_first_and_a_leftover_is_found_next_time(root, monkeypatch):
    victim = str(root / "venvs" / "lock-a")

    def crash(path):
        raise OSError("disk went away")
    monkeypatch.setattr(vp.shutil, "rmtree", crash)
    with pytest.raises(OSError):
        vp.remove(victim)
    monkeypatch.undo()
    # The venv is no longer where anything would start it from; the next scan finds the leftover.
    assert not os.path.exists(victim)
    found = vp.scan(str(root))
    assert found["leftovers"] == [str(root / "venvs" / (vp.REMOVING + "lock-a"))]
    assert "lock-a" not in [venv["name"] for venv in found["venvs"]]
    vp.remove(found["leftovers"][0])
    assert vp.scan(str(root))["leftovers"] == []


def test_disk_bytes_counts_files_without_following_links(root):
    venv = root / "venvs" / "lock-a"
    (venv / "big").write_bytes(b"x" * 100000)
    os.symlink("/usr", str(venv / "link-to-usr"))
    size = vp.disk_bytes(str(venv))
    assert 100000 <= size < 1000000


def test_a_dry_run_before_the_switch_plans_as_after_it(root):
    # current still points at lock-b; this run's lock-f is not installed yet. The real run (lock-f installed and
    # current switched) keeps lock-f and the next newest: the dry run must say the same.
    dry = vp.plan(vp.with_active(vp.scan(str(root)), str(root / "venvs" / "lock-f"), dry_run=True), keep=2)
    assert dry == ({"lock-f": "active (current points at it)", "lock-e": "one of the 2 most recently installed"},
                   ["lock-a", "lock-b", "lock-c", "lock-d"])
    os.remove(str(root / "current"))  # the real run, after the install and the switch
    make_venv(root, "lock-f", installed=2000)
    os.symlink(str(root / "venvs" / "lock-f"), str(root / "current"))
    real = vp.plan(vp.with_active(vp.scan(str(root)), str(root / "venvs" / "lock-f")), keep=2)
    assert real[1] == dry[1] and set(real[0]) == set(dry[0])


def test_a_real_run_whose_current_points_elsewhere_keeps_both(root):
    kept, remove = vp.plan(vp.with_active(vp.scan(str(root)), str(root / "venvs" / "lock-a")), keep=1)
    assert kept["lock-b"] == "active (current points at it)"
    assert kept["lock-a"] == "active after this deploy (current will point at it)"
    assert remove == ["lock-c", "lock-d"]  # lock-e: the newest installed


def test_the_active_venv_already_current_changes_nothing(root):
    found = vp.scan(str(root))
    assert vp.with_active(found, str(root / "venvs" / "lock-b")) is found
