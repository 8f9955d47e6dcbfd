"""Several files change together or not at all."""
import os
import stat

import pytest

from ansible.module_utils import atomic_files as af


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

    def flaky(src, dst):
        count.append(dst)
        if len(count) == fail_at + 1:
            raise OSError(5, "injected I/O error")
        return real(src, dst)

    monkeypatch.setattr(af.os, "replace", flaky)
    with pytest.raises(af.TransactionError, match="restored"):
        af.replace_all(changes_for(three))
    assert [open(p, "rb").read() for p in three] == before
    assert not [n for n in os.listdir(os.path.dirname(three[0])) if n.endswith(".tmp")]


def test_failure_while_staging_touches_nothing(three, monkeypatch):
    before = [open(p, "rb").read() for p in three]
    real = af.stage
    seen = []

    def flaky(path, data, like=None):
        seen.append(path)
        if len(seen) == 3:
            raise OSError(28, "No space left on device (injected)")
        return real(path, data, like)

    monkeypatch.setattr(af, "stage", flaky)
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
