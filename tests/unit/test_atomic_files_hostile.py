"""module_utils/atomic_files.py's writers as root against a folder the service user owns and planted in
(tests/helpers/planted.py): write_atomic renames over a planted link or hard link (the entry is replaced, what it
points at never written), refuses a link below its ROOT and a folder in the file's place; set_owner_mode refuses a
link, a FIFO and a file of the other kind; prune_dir removes links themselves; put_record (the verdict, the
all-reduce choice, the convergence record) writes and removes records only in a folder root alone can change, so a
link planted on the way is never followed. Nothing outside changes (a decoy tree hashed before and after)."""
import os
import stat

import pytest

from ansible.module_utils import atomic_files as af
from tests.helpers.ansible_run import run_module
from tests.helpers.planted import as_user, hang_guard

TABLE = {"install": {"prefixes": ["sglang_install_"], "roles": ["sglang_install"]}}


def key(home):
    return os.path.join(home.decoy, "keys", "id")


def test_write_atomic_renames_over_a_planted_symlink(home):
    as_user(lambda: os.symlink(key(home), home.path("record.json")))
    af.write_atomic(home.path("record.json"), b"new", mode=0o600)
    info = os.lstat(home.path("record.json"))
    assert stat.S_ISREG(info.st_mode) and (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600)


def test_write_atomic_renames_over_a_hard_link_to_a_file_outside(home):
    os.link(key(home), home.path("record.json"))  # root plants it: nobody may not link root's key
    af.write_atomic(home.path("record.json"), b"new")
    assert os.lstat(home.path("record.json")).st_nlink == 1 and os.lstat(key(home)).st_nlink == 1


def test_write_atomic_renames_over_a_planted_fifo_without_opening_it(home):
    as_user(lambda: os.mkfifo(home.path("record.json")))
    with hang_guard(5):
        af.write_atomic(home.path("record.json"), b"new")
    assert stat.S_ISREG(os.lstat(home.path("record.json")).st_mode)


def test_write_atomic_refuses_a_folder_in_the_files_place(home):
    as_user(lambda: os.mkdir(home.path("record.json")))
    with pytest.raises(IsADirectoryError):
        af.write_atomic(home.path("record.json"), b"new")
    assert os.listdir(home.path()) == ["record.json"] and os.listdir(home.path("record.json")) == []


@pytest.mark.parametrize("where", ["file", "folder"])
def test_write_atomic_below_a_root_refuses_a_planted_link_naming_it(home, where):
    def action():
        os.mkdir(home.path("venv"))
        if where == "file":
            os.mkdir(home.path("venv", "lib"))
            os.symlink(os.path.join(home.decoy, "config.json"), home.path("venv", "lib", "f.py"))
        else:
            os.symlink(home.decoy, home.path("venv", "lib"))
    as_user(action)
    link = home.path("venv", "lib", "f.py") if where == "file" else home.path("venv", "lib")
    with pytest.raises(af.UnsafePath, match="%s is a symlink \\(to %s" % (link, home.decoy)):
        af.write_atomic(home.path("venv", "lib", "f.py"), b"new", root=home.path("venv"))


def test_set_owner_mode_refuses_a_link_a_fifo_and_the_other_kind(home):
    def action():
        os.symlink(key(home), home.path("link"))
        os.symlink(os.path.join(home.decoy, "keys"), home.path("dirlink"))
        os.mkfifo(home.path("fifo"))
        os.mkdir(home.path("folder"))
    as_user(action)
    with pytest.raises(af.UnsafePath, match="link is a symlink \\(to .*keys/id\\): its owner and mode were not set"):
        af.set_owner_mode(home.path("link"), 0o644, 0, 0)
    with pytest.raises(af.UnsafePath, match="dirlink is a symlink"):
        af.set_owner_mode(home.path("dirlink"), 0o755, 0, 0, directory=True)
    with hang_guard(5):
        with pytest.raises(af.UnsafePath, match="fifo is not a regular file: its owner and mode were not set"):
            af.set_owner_mode(home.path("fifo"), 0o644, 0, 0)
    with pytest.raises(af.UnsafePath, match="folder is not a regular file"):
        af.set_owner_mode(home.path("folder"), 0o644, 0, 0)
    assert os.lstat(home.path("fifo")).st_uid == home.uid and os.lstat(home.path("folder")).st_uid == home.uid


def test_prune_dir_removes_planted_links_themselves_and_refuses_a_linked_folder(home):
    def action():
        os.makedirs(home.path("venv", "originals"))
        os.symlink(key(home), home.path("venv", "originals", "old"))
        os.mkfifo(home.path("venv", "originals", "fifo"))
        os.symlink(home.decoy, home.path("venv", "linked"))
    as_user(action)
    removed = af.prune_dir(home.path("venv"), home.path("venv", "originals"), keep={"kept"})
    assert sorted(removed) == [home.path("venv", "originals", n) for n in ("fifo", "old")]
    with pytest.raises(af.UnsafePath, match="linked is a symlink"):
        af.prune_dir(home.path("venv"), home.path("venv", "linked"), keep=set())


@pytest.mark.parametrize("text", ["{}", None])
def test_put_record_refuses_a_folder_the_service_user_can_change(home, text):
    """The record's folder is reached through a link the service user planted: nothing is written or removed
    there, and the refusal names the folder it could change and the rule."""
    as_user(lambda: os.symlink(home.decoy, home.path("state")))
    with pytest.raises(af.RecordError, match="%s is owned by uid %d, not 0; root writes and removes a record only "
                                             "in a folder that only root can change" % (os.path.dirname(home.models), home.uid)):
        af.put_record(home.path("state", "config.json"), text)


def test_put_record_still_writes_in_a_folder_root_alone_can_change(tmp_path):
    af.put_record(str(tmp_path / "choice.json"), "{}")
    assert (tmp_path / "choice.json").read_text() == "{}"
    af.put_record(str(tmp_path / "choice.json"), None)
    assert not (tmp_path / "choice.json").exists()


def test_read_record_refuses_a_planted_link_and_fifo(home):
    def action():
        os.symlink(key(home), home.path("link.json"))
        os.mkfifo(home.path("fifo.json"))
    as_user(action)
    with pytest.raises(af.RecordError, match="link.json is a symlink"):
        af.read_record(home.path("link.json"))
    with hang_guard(5):
        with pytest.raises(af.RecordError, match="fifo.json: it is not a regular file"):
            af.read_record(home.path("fifo.json"))


def test_the_convergence_module_refuses_a_record_folder_the_service_user_planted(home):
    as_user(lambda: os.symlink(home.decoy, home.path("state")))
    record = home.path("state", "converged.json")
    result = run_module("sglang_converge_state", {
        "record": record, "mode": "record", "capabilities": TABLE,
        "covers": {"install": {"files": [os.path.join(home.decoy, "config.json")]}}})
    assert result.get("failed") and result["msg"] == (
        "sglang_converge_state: %s is owned by uid %d, not 0; root writes and removes a record only in a folder that "
        "only root can change, every folder above it too: %s was not changed" % (
            os.path.dirname(home.models), home.uid, record)), result
    assert not os.path.lexists(os.path.join(home.decoy, "converged.json"))
