"""module_utils/server_state.py and symlinks: nothing saved as a file that was a link, nothing written through one."""
import os
import stat

import pytest

from ansible.module_utils import server_state


@pytest.fixture
def host(tmp_path):
    (tmp_path / "venv-a" / "lib").mkdir(parents=True)
    os.symlink(str(tmp_path / "venv-a"), str(tmp_path / "current"))
    (tmp_path / "unit").write_text("ExecStart=good\n")
    os.chmod(str(tmp_path / "unit"), 0o640)
    victim = tmp_path / "victim"
    victim.write_text("not the server's\n")
    os.chmod(str(victim), 0o600)
    return tmp_path, victim


def test_a_symlinked_file_is_not_saved(host):
    root, victim = host
    os.symlink(str(victim), str(root / "linked.env"))
    with pytest.raises(server_state.StateError, match=r"linked.env is a symlink \(to .*victim\).*nothing was saved"):
        server_state.save(str(root / "known-good"), [str(root / "unit"), str(root / "linked.env")],
                          str(root / "current"))
    assert not (root / "known-good").exists()


def test_a_restore_replaces_a_link_found_in_a_files_place_and_leaves_its_target(host):
    root, victim = host
    server_state.save(str(root / "known-good"), [str(root / "unit")], str(root / "current"))
    os.unlink(str(root / "unit"))
    os.symlink(str(victim), str(root / "unit"))
    before = victim.read_bytes()
    done = server_state.restore(str(root / "known-good"))
    assert [a["action"] for a in done["actions"]] == ["restore"]
    assert not os.path.islink(str(root / "unit")) and (root / "unit").read_text() == "ExecStart=good\n"
    assert stat.S_IMODE(os.stat(str(root / "unit")).st_mode) == 0o640
    assert victim.read_bytes() == before and stat.S_IMODE(os.stat(str(victim)).st_mode) == 0o600


def test_a_symlinked_hold_folder_in_the_venv_is_refused(host):
    root, _victim = host
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    os.symlink(str(elsewhere), str(root / "venv-a" / ".sglang-keep"))
    with pytest.raises(server_state.StateError, match=r"cannot hold the saved venv: .*\.sglang-keep is a symlink"):
        server_state.save(str(root / "known-good"), [str(root / "unit")], str(root / "current"), hold_name="known-good")
    assert os.listdir(str(elsewhere)) == [] and not (root / "known-good").exists()
