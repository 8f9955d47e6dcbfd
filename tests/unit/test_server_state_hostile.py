"""module_utils/server_state.py as root against a state folder the service user planted (tests/helpers/planted.py):
a FIFO or link in the record's place is refused, naming it, never opened (a FIFO would hang the run) nor read
through; a restore replaces a planted link or hard link by renaming over it, never writing through it. Nothing
outside the folder changes (a decoy tree hashed before and after)."""
import os
import stat

import pytest

from ansible.module_utils import server_state
from tests.helpers.ansible_run import run_module
from tests.helpers.planted import as_user, digest, fifo_released, hang_guard


def plant_folder(home, *entries):
    """The known-good folder, the service user's, with ENTRIES (name, action(path))."""
    def action():
        os.mkdir(home.path("known-good"))
        for name, make in entries:
            make(home.path("known-good", name))
    home.plant(action)


def test_a_fifo_in_the_records_place_is_refused_not_opened(home):
    plant_folder(home, ("state.json", os.mkfifo))
    for call in (lambda: server_state.load(home.path("known-good")),
                 lambda: server_state.restore(home.path("known-good"), check=True),
                 lambda: server_state.save(home.path("known-good"), [], check=True)):
        with hang_guard(5):
            with pytest.raises(server_state.StateError, match=r"known-good/state.json: it is not a regular file"):
                call()


def test_a_link_in_the_records_place_is_not_read_through(home):
    with open(os.path.join(home.decoy, "state.json"), "w") as handle:
        handle.write('{"files": {}, "saved_at": "then"}')
    home.before = digest(home.decoy)
    plant_folder(home, ("state.json", lambda path: os.symlink(os.path.join(home.decoy, "state.json"), path)))
    with pytest.raises(server_state.StateError, match=r"known-good/state.json is a symlink: it is read only as a "
                                                      r"regular file"):
        server_state.restore(home.path("known-good"))


def saved(home, tmp_path):
    """A unit saved by root into a root-owned known-good folder; the unit itself in the service user's folder."""
    unit = home.path("sglang.env")
    home.plant(lambda: open(unit, "w").write("GOOD=1\n"))
    os.chown(unit, 0, 0)
    os.chmod(unit, 0o640)
    folder = str(tmp_path / "known-good")
    server_state.save(folder, [unit])
    return folder, unit


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_restore_renames_over_a_planted_link_and_leaves_its_target(home, tmp_path, kind):
    folder, unit = saved(home, tmp_path)
    victim = os.path.join(home.decoy, "keys", "id")

    def replace():
        os.unlink(unit)
        (os.symlink if kind == "symlink" else os.link)(victim, unit)
    if kind == "hardlink":  # nobody cannot link root's 0600 key (protected_hardlinks): root plants it for them
        replace()
    else:
        as_user(replace)
    server_state.restore(folder)
    info = os.lstat(unit)
    assert stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o640)
    with open(unit) as handle:
        assert handle.read() == "GOOD=1\n"


def test_a_folder_where_the_file_should_be_is_refused_by_the_module(home, tmp_path):
    folder, unit = saved(home, tmp_path)

    def replace():
        os.unlink(unit)
        os.mkdir(unit)
    home.plant(replace)
    result = run_module("sglang_server_state", {"dir": folder, "state": "restored"})
    assert result.get("failed") and result["msg"] == (
        "sglang_server_state: %s is a folder where the saved state has a file: it is not a regular file, so nothing "
        "was restored" % unit), result
    assert os.path.isdir(unit) and os.listdir(unit) == []


def test_the_module_answers_a_planted_fifo_with_its_own_message(home):
    plant_folder(home, ("state.json", os.mkfifo))
    with fifo_released(home.path("known-good", "state.json"), 30):
        result = run_module("sglang_server_state", {"dir": home.path("known-good"), "state": "restored"})
    assert result.get("failed") and result["msg"].startswith("sglang_server_state: cannot read ")
    assert "known-good/state.json: it is not a regular file" in result["msg"]
