"""The module through real Ansible on a real sglang 0.5.21 venv: no write through a symlink, no edit lost meanwhile.

Each refusal names the link or the file, is a message (no traceback), and leaves every file inside and outside
the venv as it was (a link stays a link).
"""
import hashlib
import os
import shutil
import stat
import sys

import pytest

from tests.helpers import wheels
from tests.helpers.ansible_run import run_module
from tests.helpers.file_tree import tree

pytestmark = pytest.mark.wheels

RELEASE = "0.5.21"
G1 = "sglang/srt/layers/layer_boundary/residual/add_norm.py"
FUSION = "sglang/srt/layers/flashinfer_comm_fusion.py"


@pytest.fixture(scope="module")
def pristine_venv(pristine_venv_of):
    """The run's shared venv of RELEASE and the flashinfer-python it pins (tests/integration/conftest.py): copied."""
    return pristine_venv_of(("sglang", RELEASE),
                            ("flashinfer-python", wheels.pinned_flashinfer(wheels.wheel("sglang", RELEASE))))


@pytest.fixture
def venv(pristine_venv, tmp_path):
    return wheels.copy_venv(pristine_venv, tmp_path / "venv")




def refused(args, *roots, check=False):
    before = tree(*roots)
    result = run_module("sglang_fusion_patch", args, check=check)
    assert result.get("failed") and not result["changed"], result
    assert "module_stderr" not in result and "Traceback" not in result["msg"], result
    assert tree(*roots) == before
    return result["msg"]


@pytest.mark.parametrize("check", [False, True])
def test_a_symlinked_directory_leading_outside_the_venv_is_refused_naming_it(venv, tmp_path, check):
    site = wheels.site_packages(venv)
    layers = os.path.join(site, "sglang", "srt", "layers")
    outside = str(tmp_path / "outside-layers")
    shutil.move(layers, outside)
    os.symlink(outside, layers)
    msg = refused({"venv": venv}, venv, outside, check=check)
    assert "%s is a symlink (to %s)" % (layers, outside) in msg and "nothing written" in msg, msg


def test_a_symlinked_guard_file_is_refused_and_stays_a_link(venv, tmp_path):
    site = wheels.site_packages(venv)
    real = str(tmp_path / "add_norm.py")
    shutil.move(os.path.join(site, G1), real)
    os.symlink(real, os.path.join(site, G1))
    msg = refused({"venv": venv}, venv, real)
    assert "%s is a symlink (to %s)" % (os.path.join(site, G1), real) in msg, msg


def test_a_symlinked_record_directory_is_refused(venv, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(str(elsewhere), os.path.join(venv, ".sglang-fusion-patch"))
    msg = refused({"venv": venv}, venv, elsewhere)
    assert "%s/.sglang-fusion-patch is a symlink (to %s)" % (venv, elsewhere) in msg, msg
    msg = refused({"venv": venv, "state": "absent"}, venv, elsewhere)
    assert ".sglang-fusion-patch is a symlink" in msg, msg


def test_a_file_edited_between_read_and_rename_is_named_and_the_earlier_file_restored(venv):
    """The venv's interpreter compile-checks each new file after the module read them all; this one edits
    add_norm.py while doing so (a concurrent edit, deterministically placed between read and rename)."""
    site = wheels.site_packages(venv)
    guard = os.path.join(site, G1)
    python = os.path.join(venv, "bin", "python")
    os.unlink(python)
    with open(python, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\ncase \"$*\" in *add_norm.py*) printf '# edited meanwhile\\n' >> '%s' ;; esac\n"
                     "exec '%s' \"$@\"\n" % (guard, os.path.realpath(sys.executable)))
    os.chmod(python, stat.S_IRWXU)
    originals = {rel: open(os.path.join(site, rel), "rb").read() for rel in (G1, FUSION)}
    result = run_module("sglang_fusion_patch", {"venv": venv})
    assert result.get("failed") and not result["changed"], result
    assert "Traceback" not in result["msg"]
    edited = originals[G1] + b"# edited meanwhile\n"
    assert "%s changed after it was read (sha256 %s then, %s now)" % (
        guard, hashlib.sha256(originals[G1]).hexdigest(), hashlib.sha256(edited).hexdigest()) in result["msg"]
    assert "1 file(s) already written were restored, nothing was changed" in result["msg"], result["msg"]
    assert open(guard, "rb").read() == edited  # the edit is kept
    assert open(os.path.join(site, FUSION), "rb").read() == originals[FUSION]  # renamed first, then put back
    assert not os.path.exists(os.path.join(venv, ".sglang-fusion-patch"))
