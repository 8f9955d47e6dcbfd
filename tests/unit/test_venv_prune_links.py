"""module_utils/venv_prune.py and symlinks: a link under venvs/ is removed itself, what it points to never."""
import os

from ansible.module_utils import venv_prune


def test_a_symlinked_leftover_is_removed_without_entering_its_target(tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "data").write_bytes(b"x" * 8192)
    venvs = tmp_path / "root" / "venvs"
    venvs.mkdir(parents=True)
    leftover = venvs / (venv_prune.REMOVING + "old")
    os.symlink(str(target), str(leftover))
    found = venv_prune.scan(str(tmp_path / "root"))
    assert found["leftovers"] == [str(leftover)]
    assert venv_prune.disk_bytes(str(leftover)) == 0  # nothing of the target is counted as freed
    venv_prune.remove(str(leftover))
    assert not os.path.lexists(str(leftover)) and (target / "data").read_bytes() == b"x" * 8192


def test_a_venv_swapped_for_a_link_before_its_removal_loses_only_the_link(tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "data").write_text("keep")
    venvs = tmp_path / "root" / "venvs"
    venvs.mkdir(parents=True)
    os.symlink(str(target), str(venvs / "lock-a"))
    venv_prune.remove(str(venvs / "lock-a"))
    assert os.listdir(str(venvs)) == [] and (target / "data").read_text() == "keep"
