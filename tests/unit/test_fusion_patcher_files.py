"""The patch's file operations on a real directory tree: no write through a symlink, no edit lost meanwhile.

A small venv (sglang 0.5.4-style communicator.py and 0.5.14-style flashinfer_comm_fusion.py, as in
test_fusion_guards) is patched and reverted by module_utils/fusion_patcher.py itself. A concurrent edit is
simulated by a hook that runs between the patch's read and its rename (no sleeps, no timing).
"""
import hashlib
import os
import shutil

import pytest

from ansible.module_utils import atomic_files as af
from ansible.module_utils import fusion_patcher as fp
from tests.helpers.file_tree import tree as snapshot
from tests.unit.test_fusion_guards import FUSION_014, V054_INLINE

COMM = "sglang/srt/layers/communicator.py"
FUSION = "sglang/srt/layers/flashinfer_comm_fusion.py"


def meta(site, name, version):
    folder = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    folder.mkdir()
    (folder / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))


@pytest.fixture
def venv(tmp_path):
    root = tmp_path / "venv"
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "sglang" / "srt" / "layers").mkdir(parents=True)
    meta(site, "sglang", "0.5.14")
    meta(site, "flashinfer-python", "0.6.18")
    (site / "sglang" / "srt" / "utils.py").write_text("def is_sm120_supported():\n    return False\n")
    (site / COMM).write_bytes(V054_INLINE)
    (site / FUSION).write_bytes(FUSION_014)
    return root


def site_of(venv):
    return venv / "lib" / "python3.11" / "site-packages"


def sha(data):
    return hashlib.sha256(data).hexdigest()


def edit_meanwhile(monkeypatch, when, edit):
    """Run EDIT(path) just before the re-check and rename of the file WHEN (a path ending)."""
    real = af.replace_all

    def with_hook(changes, **kwargs):
        def hook(path):
            if path.endswith(when):
                edit(path)
        return real(changes, before_rename=hook, **kwargs)

    monkeypatch.setattr(af, "replace_all", with_hook)


def test_apply_and_revert_are_byte_exact(venv):
    site = site_of(venv)
    result = fp.apply(str(venv))
    assert result["changed"] and sorted(f["path"] for f in result["files"] if f["changed"]) == [
        str(site / COMM), str(site / FUSION)]
    assert fp.revert(str(venv))["changed"]
    assert (site / COMM).read_bytes() == V054_INLINE and (site / FUSION).read_bytes() == FUSION_014
    assert not (venv / fp.STATE_DIR_NAME).exists()


@pytest.mark.parametrize("linked", ["sglang", "sglang/srt", "sglang/srt/layers"])
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_symlinked_directory_leading_outside_the_venv_is_refused_naming_it(venv, tmp_path, linked, check_mode):
    site = site_of(venv)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(str(site / linked), str(outside / "moved"))
    os.symlink(str(outside / "moved"), str(site / linked))
    before = snapshot(venv, outside)
    with pytest.raises(fp.PatchRefused) as refused:
        fp.apply(str(venv), check_mode=check_mode)
    assert "%s is a symlink (to %s)" % (site / linked, outside / "moved") in refused.value.msg
    assert "nothing written" in refused.value.msg
    assert snapshot(venv, outside) == before


def test_a_symlinked_guard_file_is_refused_and_stays_a_link(venv, tmp_path):
    site = site_of(venv)
    real = venv / "comm-real.py"  # inside the venv even: a link is never turned into a file
    shutil.move(str(site / COMM), str(real))
    os.symlink(str(real), str(site / COMM))
    before = snapshot(venv)
    with pytest.raises(fp.PatchRefused, match=r"communicator.py is a symlink \(to .*comm-real.py\)"):
        fp.apply(str(venv))
    assert snapshot(venv) == before
    assert os.path.islink(str(site / COMM)) and real.read_bytes() == V054_INLINE


def test_a_symlinked_record_directory_is_refused_in_both_states(venv, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(str(elsewhere), str(venv / fp.STATE_DIR_NAME))
    before = snapshot(venv, elsewhere)
    for run in (fp.apply, fp.revert):
        with pytest.raises(fp.PatchRefused, match=r"\.sglang-fusion-patch is a symlink \(to .*elsewhere\)"):
            run(str(venv))
        assert snapshot(venv, elsewhere) == before


def test_revert_refuses_a_guard_file_that_became_a_symlink_and_keeps_the_record(venv, tmp_path):
    site = site_of(venv)
    fp.apply(str(venv))
    patched = (site / COMM).read_bytes()
    copy = tmp_path / "copy.py"
    copy.write_bytes(patched)  # the bytes the record expects, reached through a link
    os.unlink(str(site / COMM))
    os.symlink(str(copy), str(site / COMM))
    before = snapshot(venv, copy)
    with pytest.raises(fp.PatchRefused, match=r"cannot restore: .*communicator.py is a symlink"):
        fp.revert(str(venv))
    with pytest.raises(fp.PatchRefused, match=r"communicator.py is a symlink"):
        fp.revert(str(venv), check_mode=True)
    assert snapshot(venv, copy) == before


def test_an_edit_between_read_and_rename_stops_the_patch_and_restores_the_earlier_file(venv, monkeypatch):
    site = site_of(venv)
    edited = FUSION_014 + b"# an operator's edit\n"
    edit_meanwhile(monkeypatch, FUSION, lambda path: open(path, "wb").write(edited))
    with pytest.raises(af.ChangedMeanwhile) as stopped:
        fp.apply(str(venv))
    msg = str(stopped.value)
    assert "%s changed after it was read (sha256 %s then, %s now)" % (site / FUSION, sha(FUSION_014), sha(edited)) \
        in msg
    assert "1 file(s) already written were restored, nothing was changed" in msg
    assert (site / COMM).read_bytes() == V054_INLINE  # renamed first, then put back
    assert (site / FUSION).read_bytes() == edited  # the edit is kept
    assert not (venv / fp.STATE_DIR_NAME).exists()  # no record, no kept original
    assert not [n for n in os.listdir(str(site / "sglang/srt/layers")) if n.endswith(".tmp")]


def test_the_same_bytes_in_another_file_count_as_a_change(venv, monkeypatch):
    """Content alone is not enough: a file replaced meanwhile (another inode), even with the same bytes."""
    site = site_of(venv)

    def replace(path):
        with open(path + ".new", "wb") as handle:
            handle.write(open(path, "rb").read())
        os.replace(path + ".new", path)

    edit_meanwhile(monkeypatch, COMM, replace)
    with pytest.raises(af.ChangedMeanwhile, match=r"communicator.py is not the file that was read \(inode"):
        fp.apply(str(venv))
    assert (site / COMM).read_bytes() == V054_INLINE and (site / FUSION).read_bytes() == FUSION_014
    assert not (venv / fp.STATE_DIR_NAME).exists()


def test_an_edit_during_revert_keeps_the_patch_and_its_record(venv, monkeypatch):
    site = site_of(venv)
    fp.apply(str(venv))
    patched = {rel: (site / rel).read_bytes() for rel in (COMM, FUSION)}
    state = (venv / fp.STATE_DIR_NAME / "state.json").read_bytes()
    edited = patched[FUSION] + b"# edited while reverting\n"
    edit_meanwhile(monkeypatch, FUSION, lambda path: open(path, "wb").write(edited))
    with pytest.raises(af.ChangedMeanwhile, match="flashinfer_comm_fusion.py changed after it was read"):
        fp.revert(str(venv))
    assert (site / COMM).read_bytes() == patched[COMM] and (site / FUSION).read_bytes() == edited
    assert (venv / fp.STATE_DIR_NAME / "state.json").read_bytes() == state
    monkeypatch.undo()
    result = fp.revert(str(venv))  # the next run sees the edit as foreign and restores the other file
    assert result["foreign_files"] == [str(site / FUSION)]
    assert (site / COMM).read_bytes() == V054_INLINE
