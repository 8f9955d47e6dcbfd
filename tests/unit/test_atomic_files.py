"""Several files change together or not at all."""
import os
import stat

import pytest

from ansible.module_utils import atomic_files as af
from tests.helpers.file_tree import tree
from tests.helpers.planted import hang_guard


@pytest.fixture
def three(tmp_path):
    paths = []
    for index in range(3):
        path = tmp_path / ("f%d.py" % index)
        path.write_bytes(b"old %d\n" % index)
        os.chmod(path, 0o640)
        paths.append(str(path))
    return paths


def changes_for(paths):
    return [(p, open(p, "rb").read(), b"new " + open(p, "rb").read()) for p in paths]


def test_all_files_replaced_with_mode_kept(three):
    af.replace_all(changes_for(three))
    assert [open(p, "rb").read() for p in three] == [b"new old %d\n" % i for i in range(3)]
    assert {stat.S_IMODE(os.stat(p).st_mode) for p in three} == {0o640}


@pytest.mark.parametrize("fail_at", [1, 2])
def test_failure_on_a_later_replace_restores_the_earlier_ones(three, monkeypatch, fail_at):
    before = [open(p, "rb").read() for p in three]
    real = os.replace
    count = []

    def flaky(src, dst, **dir_fds):
        count.append(dst)
        if len(count) == fail_at + 1:
            raise OSError(5, "injected I/O error")
        return real(src, dst, **dir_fds)

    monkeypatch.setattr(af.os, "replace", flaky)
    with pytest.raises(af.TransactionError, match="restored"):
        af.replace_all(changes_for(three))
    assert [open(p, "rb").read() for p in three] == before
    assert not [n for n in os.listdir(os.path.dirname(three[0])) if n.endswith(".tmp")]


def test_failure_while_staging_touches_nothing(three, monkeypatch):
    before = [open(p, "rb").read() for p in three]
    real = af._Target.stage
    seen = []

    def flaky(target, data, *args, **kwargs):
        seen.append(target.path)
        if len(seen) == 3:
            raise OSError(28, "No space left on device (injected)")
        return real(target, data, *args, **kwargs)

    monkeypatch.setattr(af._Target, "stage", flaky)
    with pytest.raises(af.TransactionError, match="nothing was changed"):
        af.replace_all(changes_for(three))
    assert [open(p, "rb").read() for p in three] == before
    assert not [n for n in os.listdir(os.path.dirname(three[0])) if n.endswith(".tmp")]


def test_bytecode_of_every_tag_is_removed(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text("x = 1\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    for name in ("mod.cpython-311.pyc", "mod.cpython-312.opt-1.pyc", "other.cpython-311.pyc"):
        (cache / name).write_bytes(b"")
    removed = af.invalidate_bytecode(str(module))
    assert sorted(os.path.basename(p) for p in removed) == ["mod.cpython-311.pyc", "mod.cpython-312.opt-1.pyc"]
    assert os.listdir(cache) == ["other.cpython-311.pyc"]


def test_read_only_file_is_reported_even_for_root(tmp_path):
    path = tmp_path / "ro.py"
    path.write_text("x = 1\n")
    os.chmod(path, 0o444)
    assert "read-only" in af.writable_problem(str(path))
    os.chmod(path, 0o644)
    assert af.writable_problem(str(path)) is None
    assert "does not exist" in af.writable_problem(str(tmp_path / "missing.py"))


def test_a_record_is_written_read_back_and_removed(tmp_path):
    record = tmp_path / "verdict.json"
    assert af.read_record(str(record)) is None
    af.put_record(str(record), '{"passed": true}\n')
    assert af.read_record(str(record)) == '{"passed": true}\n'
    assert oct(record.stat().st_mode & 0o777) == oct(0o644)
    af.put_record(str(record), None)
    assert not record.exists()
    af.put_record(str(record), None)  # nothing to remove is no failure
    diff = af.record_diff(str(record), None, "new\n")
    assert diff == {"before": "", "after": "new\n", "before_header": str(record), "after_header": str(record)}


def test_a_record_is_never_read_through_a_link_nor_from_a_fifo(tmp_path):
    # What root decides from (the gate's verdict, the all-reduce choice, the converge record): a link or a FIFO in its
    # place is refused by name, the link's target never read, a FIFO never opened for a read that would wait.
    secret = tmp_path / "secret"
    secret.write_text('{"passed": true}\n')
    (tmp_path / "gate-verdict.json").symlink_to(secret)
    with pytest.raises(af.RecordError, match="gate-verdict.json is a symlink"):
        af.read_record(str(tmp_path / "gate-verdict.json"))
    os.mkfifo(str(tmp_path / "allreduce-choice.json"))
    with hang_guard(10), pytest.raises(af.RecordError, match="allreduce-choice.json: it is not a regular file"):
        af.read_record(str(tmp_path / "allreduce-choice.json"))


def test_record_failures_name_the_file_and_keep_the_old_one(tmp_path):
    (tmp_path / "a-directory").mkdir()
    with pytest.raises(af.RecordError, match="cannot read .*a-directory"):
        af.read_record(str(tmp_path / "a-directory"))
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(af.RecordError, match="cannot read .*binary"):
        af.read_record(str(tmp_path / "binary"))
    with pytest.raises(af.RecordError, match="absent is not a directory"):
        af.put_record(str(tmp_path / "absent" / "v.json"), "x")
    with pytest.raises(af.RecordError, match="updating .*a-directory failed.*unchanged"):
        af.put_record(str(tmp_path / "a-directory"), "x")
    assert (tmp_path / "a-directory").is_dir()


# ------------------------------------------------------------------------------- symlinks and edits made meanwhile



@pytest.fixture
def rooted(tmp_path):
    """root/pkg/mod.py, and a directory outside root."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_bytes(b"inside\n")
    outside.mkdir()
    (outside / "mod.py").write_bytes(b"outside\n")
    os.chmod(str(outside / "mod.py"), 0o600)
    return root, outside


def test_a_rooted_write_refuses_a_symlinked_directory_naming_it(rooted):
    root, outside = rooted
    os.rename(str(root / "pkg"), str(root / "pkg-real"))
    os.symlink(str(outside), str(root / "pkg"))
    before = tree(root, outside)
    assert "%s is a symlink (to %s)" % (root / "pkg", outside) in af.link_problem(str(root), str(root / "pkg/mod.py"))
    with pytest.raises(af.UnsafePath, match=r"pkg is a symlink \(to .*outside\).*nothing was changed"):
        af.replace_all([(str(root / "pkg/mod.py"), b"outside\n", b"new\n")], root=str(root))
    with pytest.raises(af.UnsafePath, match=r"pkg is a symlink"):
        af.write_atomic(str(root / "pkg/mod.py"), b"new\n", root=str(root))
    assert tree(root, outside) == before


def test_a_rooted_write_refuses_a_symlinked_file_and_leaves_the_link(rooted):
    root, outside = rooted
    os.unlink(str(root / "pkg/mod.py"))
    os.symlink(str(outside / "mod.py"), str(root / "pkg/mod.py"))
    before = tree(root, outside)
    with pytest.raises(af.UnsafePath, match=r"mod.py is a symlink"):
        af.write_atomic(str(root / "pkg/mod.py"), b"new\n", root=str(root))
    assert tree(root, outside) == before


def test_symlinks_at_or_above_the_root_are_its_own_location(rooted, tmp_path):
    root, _outside = rooted
    os.symlink(str(root), str(tmp_path / "current"))
    assert af.link_problem(str(tmp_path / "current"), str(tmp_path / "current/pkg/mod.py")) is None
    af.write_atomic(str(tmp_path / "current/pkg/mod.py"), b"new\n", root=str(tmp_path / "current"))
    assert (root / "pkg/mod.py").read_bytes() == b"new\n"
    assert "is not inside" in af.link_problem(str(root / "pkg"), str(root / "other.py"))


def test_an_unrooted_write_replaces_a_symlink_never_writing_through_it(rooted):
    root, outside = rooted
    link = root / "record.json"
    os.symlink(str(outside / "mod.py"), str(link))
    af.write_atomic(str(link), b"record\n", mode=0o644)
    assert not os.path.islink(str(link)) and link.read_bytes() == b"record\n"
    assert stat.S_IMODE(os.stat(str(link)).st_mode) == 0o644  # not the target's 0600
    assert (outside / "mod.py").read_bytes() == b"outside\n"
    assert stat.S_IMODE(os.stat(str(outside / "mod.py")).st_mode) == 0o600


def test_an_edit_before_a_later_rename_restores_the_earlier_files(three):
    before = [open(p, "rb").read() for p in three]

    def edit(path):
        if path == three[2]:
            with open(path, "ab") as handle:
                handle.write(b"edited meanwhile\n")

    with pytest.raises(af.ChangedMeanwhile) as stopped:
        af.replace_all(changes_for(three), before_rename=edit)
    assert str(stopped.value).startswith("%s changed after it was read" % three[2])
    assert "2 file(s) already written were restored" in str(stopped.value)
    assert [open(p, "rb").read() for p in three] == before[:2] + [before[2] + b"edited meanwhile\n"]
    assert not [n for n in os.listdir(os.path.dirname(three[0])) if n.endswith(".tmp")]


def test_an_edit_to_a_file_already_renamed_is_not_undone(three):
    """The rollback re-checks too: a file edited after this run renamed it keeps that edit and is named."""
    def edit(path):
        if path == three[1]:
            with open(three[0], "ab") as handle:
                handle.write(b"edited\n")
            with open(three[1], "ab") as handle:
                handle.write(b"edited\n")

    with pytest.raises(af.TransactionError, match=r"f1.py changed after it was read .*; could not restore .*f0.py \(changed again after this run "
                       r"wrote it: left as it is now\)"):
        af.replace_all(changes_for(three), before_rename=edit)
    assert open(three[0], "rb").read() == b"new old 0\nedited\n"


def test_a_file_that_appears_or_is_replaced_meanwhile_is_refused(tmp_path):
    new = str(tmp_path / "new.txt")
    with pytest.raises(af.ChangedMeanwhile, match="new.txt appeared after it was read"):
        af.replace_all([(new, None, b"mine\n")], before_rename=lambda p: open(p, "wb").write(b"theirs\n"))
    assert open(new, "rb").read() == b"theirs\n"
    old = tmp_path / "old.txt"
    old.write_bytes(b"same\n")
    data, ident = af.read_snapshot(str(old))

    def same_bytes_new_inode(path):
        with open(path + ".x", "wb") as handle:
            handle.write(b"same\n")
        os.replace(path + ".x", path)

    with pytest.raises(af.ChangedMeanwhile, match="old.txt is not the file that was read"):
        af.replace_all([(str(old), data, b"mine\n")], identities={str(old): ident},
                       before_rename=same_bytes_new_inode)
    assert old.read_bytes() == b"same\n"
    with pytest.raises(af.ChangedMeanwhile, match="old.txt changed after it was read"):
        af.write_atomic(str(old), b"mine\n", expect=b"other\n")


def test_pruning_and_bytecode_removal_enter_no_symlink(rooted, tmp_path):
    root, outside = rooted
    (outside / "keep-me").write_bytes(b"x")
    os.symlink(str(outside), str(root / "records"))
    with pytest.raises(af.UnsafePath, match="records is a symlink"):
        af.prune_dir(str(root), str(root / "records"), keep=set())
    assert af.prune_dir(str(root), str(root / "absent"), keep=set()) == []
    (outside / "mod.cpython-311.pyc").write_bytes(b"")
    os.symlink(str(outside), str(root / "pkg" / "__pycache__"))
    assert af.invalidate_bytecode(str(root / "pkg/mod.py"), root=str(root)) == []
    assert sorted(os.listdir(str(outside))) == ["keep-me", "mod.cpython-311.pyc", "mod.py"]
