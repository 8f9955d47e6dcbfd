"""module_utils/root_trust.py on real folders: a path root runs passes only when it and every folder above it (as
given and as resolved) are root's and not writable by group or others; a venv's every entry too."""
import os
import sys

import pytest

from ansible.module_utils import root_trust as rt


@pytest.fixture
def venv(tmp_path):
    """A venv-like tree of root's: bin/python a link to this interpreter, a site-packages file."""
    root = tmp_path / "opt" / "hf-client"
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "site-packages").mkdir(parents=True)
    (root / "lib" / "site-packages" / "huggingface_hub.py").write_text("")
    os.symlink(os.path.realpath(sys.executable), str(root / "bin" / "python"))
    for path in (tmp_path / "opt", root):
        os.chmod(str(path), 0o755)
    return root


def test_a_root_only_venv_passes_even_below_sticky_tmp(venv):
    assert rt.interpreter_problem(str(venv / "bin" / "python")) is None


def test_a_group_writable_parent_is_refused(venv):
    os.chmod(str(venv.parent), 0o775)
    assert rt.interpreter_problem(str(venv / "bin" / "python")) == (
        "%s is writable by group or others (mode 0775)" % venv.parent)


def test_a_parent_another_user_owns_is_refused(venv):
    os.chown(str(venv.parent), 65534, 65534)
    assert rt.interpreter_problem(str(venv / "bin" / "python")) == "%s is owned by uid 65534, not 0" % venv.parent


def test_a_planted_module_in_the_venv_is_refused(venv):
    planted = venv / "lib" / "site-packages" / "sitecustomize.py"
    planted.write_text("")
    os.chown(str(planted), 65534, 65534)
    assert rt.interpreter_problem(str(venv / "bin" / "python")) == "%s is owned by uid 65534, not 0" % planted
    os.chown(str(planted), 0, 0)
    os.chmod(str(planted), 0o666)
    assert "is writable by group or others (mode 0666)" in rt.interpreter_problem(str(venv / "bin" / "python"))


def test_an_interpreter_link_to_a_foreign_place_is_refused(venv, tmp_path):
    foreign = tmp_path / "home" / "python"
    foreign.parent.mkdir()
    foreign.write_text("")
    os.chown(str(foreign.parent), 65534, 65534)
    os.unlink(str(venv / "bin" / "python"))
    os.symlink(str(foreign), str(venv / "bin" / "python"))
    assert rt.interpreter_problem(str(venv / "bin" / "python")) == "%s is owned by uid 65534, not 0" % foreign.parent


def test_a_sticky_world_writable_folder_passes_only_towards_roots_own_entry(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o1777)
    (shared / "mine").mkdir()
    assert rt.path_problem(str(shared / "mine")) is None
    os.chown(str(shared / "mine"), 65534, 65534)
    assert rt.path_problem(str(shared / "mine")).startswith("%s is writable by group or others" % shared)
    os.chmod(str(shared), 0o777)
    os.chown(str(shared / "mine"), 0, 0)
    assert rt.path_problem(str(shared / "mine")) == "%s is writable by group or others (mode 0777)" % shared
