"""module_utils/safe_files.py on real folders: no operation follows a link below its root, opens a FIFO, chmods or
removes through a link; refusals name the path and the rule; folders root writes into must be its own."""
import os
import stat

import pytest

from ansible.module_utils import safe_files as sf
from ansible.module_utils.safe_files import UnsafeFile
from tests.helpers.planted import digest


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_bytes(b"data")
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret").write_bytes(b"secret")
    os.chmod(str(outside / "secret"), 0o600)
    before = digest(outside)
    with sf.Tree(str(root)) as opened:
        yield opened, root, outside
    assert digest(outside) == before


def test_reads_and_writes_go_through_no_link_anywhere_on_the_way(tree):
    models, root, outside = tree
    os.symlink(str(outside), str(root / "link"))
    with pytest.raises(UnsafeFile, match="link is a symbolic link: root follows no link inside .*root \\(to "):
        models.read_bytes("link/secret")
    with pytest.raises(UnsafeFile, match="link is a symbolic link"):
        models.write_atomic("link/new", b"x")
    os.symlink(str(outside / "secret"), str(root / "a" / "s"))
    for call in (lambda: models.read_bytes("a/s"), lambda: models.write_atomic("a/s", b"x"),
                 lambda: models.open_file("a/s", os.O_WRONLY), lambda: models.remove_tree("a/s")):
        with pytest.raises(UnsafeFile, match="a/s is a symbolic link"):
            call()


def test_a_fifo_is_refused_before_it_is_opened(tree):
    models, root, _outside = tree
    os.mkfifo(str(root / "a" / "p"))
    for call in (lambda: models.read_bytes("a/p"), lambda: models.open_file("a/p", os.O_RDWR | os.O_CREAT),
                 lambda: models.write_atomic("a/p", b"x"), lambda: models.walk("a"), lambda: models.kind("a/p")):
        with pytest.raises(UnsafeFile, match="a/p is a FIFO, not a regular file or folder"):
            call()


def test_names_that_leave_the_root_are_refused(tree):
    models, _root, _outside = tree
    for name in ("../outside/secret", "/etc/passwd", "a//f", "a/./b", ""):
        with pytest.raises(UnsafeFile, match="not a plain relative path"):
            models.read_bytes(name)


def test_writes_need_folders_root_alone_can_change(tree):
    models, root, _outside = tree
    os.chmod(str(root / "a"), 0o777)
    with pytest.raises(UnsafeFile, match="a is writable by group or others .mode 0777; refused: root writes only"):
        models.write_atomic("a/b/new", b"x")
    os.chmod(str(root / "a"), 0o755)
    os.chown(str(root / "a" / "b"), 65534, 65534)
    with pytest.raises(UnsafeFile, match="a/b is owned by uid 65534, not 0"):
        models.write_atomic("a/b/new", b"x")
    assert not (root / "a" / "b" / "new").exists()


def test_an_atomic_write_replaces_the_file_and_sets_its_mode_on_the_descriptor(tree):
    models, root, _outside = tree
    models.write_atomic("a/b/f", b"new", mode=0o640)
    assert (root / "a" / "b" / "f").read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(str(root / "a" / "b" / "f")).st_mode) == 0o640
    assert sorted(os.listdir(str(root / "a" / "b"))) == ["f"]  # no temporary file left
    models.write_atomic("c/d/g", b"made")
    assert (root / "c" / "d" / "g").read_bytes() == b"made"


def test_chmod_tree_refuses_a_link_before_changing_any_mode(tree):
    models, root, outside = tree
    os.chmod(str(root / "a" / "b" / "f"), 0o600)
    os.symlink(str(outside / "secret"), str(root / "a" / "b" / "z"))
    with pytest.raises(UnsafeFile, match="a/b/z is a symbolic link"):
        models.chmod_tree("a")
    assert stat.S_IMODE(os.stat(str(root / "a" / "b" / "f")).st_mode) == 0o600
    os.unlink(str(root / "a" / "b" / "z"))
    models.chmod_tree("a")
    assert stat.S_IMODE(os.stat(str(root / "a" / "b" / "f")).st_mode) == 0o644


def test_remove_tree_removes_links_inside_never_their_targets_and_goes_deep(tree):
    models, root, outside = tree
    os.symlink(str(outside), str(root / "a" / "b" / "to-outside"))
    os.symlink(str(outside / "secret"), str(root / "a" / "to-secret"))
    os.mkfifo(str(root / "a" / "fifo"))
    fd = os.open(str(root / "a"), os.O_RDONLY)
    for _level in range(1500):  # deeper than Python's recursion limit (os.makedirs itself would recurse)
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    assert models.remove_tree("a") is True
    assert not (root / "a").exists() and os.listdir(str(root)) == []


def test_unlink_removes_a_link_itself_and_refuses_a_folder(tree):
    models, root, outside = tree
    os.symlink(str(outside / "secret"), str(root / "l"))
    assert models.unlink("l") is True and not os.path.lexists(str(root / "l"))
    with pytest.raises(UnsafeFile, match="a is a folder where a file is expected"):
        models.unlink("a")


def test_read_regular_refuses_a_fifo_outside_any_tree(tmp_path):
    os.mkfifo(str(tmp_path / "p"))
    with pytest.raises(UnsafeFile, match="p is a FIFO, not a regular file: it is not read"):
        sf.read_regular(str(tmp_path / "p"), 10)
    (tmp_path / "f").write_bytes(b"0123456789ab")
    assert sf.read_regular(str(tmp_path / "f"), 10) == b"0123456789a"
