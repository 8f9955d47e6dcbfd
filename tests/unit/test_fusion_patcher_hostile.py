"""module_utils/fusion_patcher.py as root against a venv the service user owns and planted in
(tests/helpers/planted.py): a FIFO in the record's or a kept original's place is never opened (it hung the run), a
link is refused naming it, a hard link to a file outside is renamed over, never written through. Nothing outside
the venv changes (a decoy tree hashed before and after)."""
import os
import pathlib
import stat

import pytest

from ansible.module_utils import atomic_files as af
from ansible.module_utils import fusion_patcher as fp
from tests.helpers.ansible_run import run_module
from tests.helpers.planted import Home, as_user, digest, fifo_released, hang_guard
from tests.unit.test_fusion_guards import FUSION_014, V054_INLINE
from tests.unit.test_fusion_patcher_files import COMM, FUSION, meta, sha


@pytest.fixture
def home():
    """A small venv (as in test_fusion_patcher_files) handed to the service user, in the folder it owns."""
    planted = Home()
    venv = planted.path("venv")
    site = os.path.join(venv, "lib", "python3.11", "site-packages")
    os.makedirs(os.path.join(site, "sglang", "srt", "layers"))
    meta(pathlib.Path(site), "sglang", "0.5.14")
    meta(pathlib.Path(site), "flashinfer-python", "0.6.18")
    for rel, data in (("sglang/srt/utils.py", b"def is_sm120_supported():\n    return False\n"),
                      (COMM, V054_INLINE), (FUSION, FUSION_014)):
        with open(os.path.join(site, rel), "wb") as handle:
            handle.write(data)
    for directory, dirs, files in os.walk(venv):
        for name in [directory] + [os.path.join(directory, n) for n in dirs + files]:
            os.lchown(name, planted.uid, planted.gid)
    planted.venv, planted.site = venv, site
    yield planted
    assert planted.decoy_unchanged()
    planted.close()


def state(home, *parts):
    return os.path.join(home.venv, fp.STATE_DIR_NAME, *parts)


def plant_record(home, make):
    def action():
        os.mkdir(state(home))
        make(state(home, "state.json"))
    as_user(action)


def test_a_fifo_in_the_records_place_is_refused_not_opened(home):
    plant_record(home, os.mkfifo)
    for run in (fp.apply, fp.revert):
        with hang_guard(5):
            with pytest.raises(fp.PatchRefused, match=r"cannot read .*\.sglang-fusion-patch/state.json: it is not a "
                                                      r"regular file .*; nothing was changed"):
                run(home.venv)
    assert open(os.path.join(home.site, COMM), "rb").read() == V054_INLINE


def test_a_link_in_the_records_place_is_refused_naming_it(home):
    plant_record(home, lambda path: os.symlink(os.path.join(home.decoy, "config.json"), path))
    for run in (fp.apply, fp.revert):
        with pytest.raises(fp.PatchRefused, match=r"state.json is a symlink"):
            run(home.venv)
    assert os.path.islink(state(home, "state.json"))


def test_a_fifo_in_a_kept_originals_place_is_replaced_not_opened(home):
    def action():
        os.makedirs(state(home, "originals"))
        os.mkfifo(state(home, "originals", sha(V054_INLINE)))
    as_user(action)
    with hang_guard(5):
        assert fp.apply(home.venv)["changed"]
    kept = os.lstat(state(home, "originals", sha(V054_INLINE)))
    assert stat.S_ISREG(kept.st_mode) and open(state(home, "originals", sha(V054_INLINE)), "rb").read() == V054_INLINE
    assert fp.revert(home.venv)["changed"]
    assert open(os.path.join(home.site, COMM), "rb").read() == V054_INLINE


def test_a_link_in_a_kept_originals_place_is_refused_and_nothing_is_patched(home):
    def action():
        os.makedirs(state(home, "originals"))
        os.symlink(os.path.join(home.decoy, "config.json"), state(home, "originals", sha(V054_INLINE)))
    as_user(action)
    with pytest.raises(af.UnsafePath, match=r"originals/%s is a symlink \(to .*decoy/config.json\)" % sha(V054_INLINE)):
        fp.apply(home.venv)
    assert open(os.path.join(home.site, COMM), "rb").read() == V054_INLINE


def test_a_guard_file_hard_linked_to_a_file_outside_is_renamed_over(home):
    comm = os.path.join(home.site, COMM)
    outside = os.path.join(home.decoy, "communicator.py")
    with open(outside, "wb") as handle:  # root's file; nobody may not link it (protected_hardlinks): root plants it
        handle.write(V054_INLINE)
    home.before = digest(home.decoy)
    os.unlink(comm)
    os.link(outside, comm)
    assert fp.apply(home.venv)["changed"]
    assert os.lstat(comm).st_nlink == 1 and open(comm, "rb").read() != V054_INLINE
    assert open(outside, "rb").read() == V054_INLINE


def test_the_module_answers_a_planted_fifo_with_its_own_message(home):
    plant_record(home, os.mkfifo)
    with fifo_released(state(home, "state.json"), 30):
        result = run_module("sglang_fusion_patch", {"venv": home.venv, "state": "absent"})
    assert result.get("failed") and "state.json: it is not a regular file" in result["msg"], result
