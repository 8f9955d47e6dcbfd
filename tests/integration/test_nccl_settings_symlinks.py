"""sglang_nccl_settings through real Ansible: a symlink in place of a delivered file (or on the way to the hook)
is refused naming it; no link's target changes mode, owner or content; the link stays a link."""
import os
import shutil
import stat

import pytest

from tests.helpers import wheels
from tests.helpers.ansible_run import run_module

pytestmark = pytest.mark.wheels

FACTS = {"nvlink": False, "all_p2p_ok": True, "gpu_count": 2,
         "topology": {"gpus": ["GPU0", "GPU1"],
                      "matrix": {"GPU0": {"GPU0": "X", "GPU1": "PHB"}, "GPU1": {"GPU0": "PHB", "GPU1": "X"}}}}


@pytest.fixture(scope="module")
def pristine(pristine_venv_of):
    return pristine_venv_of(("sglang", "0.5.21"))  # only copied


@pytest.fixture
def setup(pristine, tmp_path):
    venv = wheels.copy_venv(pristine, tmp_path / "venv")
    victim = tmp_path / "victim"
    victim.write_bytes(b"root's secret\n")
    os.chmod(str(victim), 0o600)
    args = {"venv": venv, "env_file": str(tmp_path / "etc" / "nccl.env"), "gpu_facts": FACTS}
    delivered = run_module("sglang_nccl_settings", args)
    assert delivered["changed"] and not delivered.get("failed"), delivered
    return args, delivered["files"], victim


def tree(*roots):
    found = {}
    for root in roots:
        for directory, dirs, files in os.walk(str(root)):
            for name in dirs + files:
                path = os.path.join(directory, name)
                info = os.lstat(path)
                found[path] = (stat.S_IMODE(info.st_mode), info.st_uid,
                               os.readlink(path) if stat.S_ISLNK(info.st_mode) else
                               open(path, "rb").read() if stat.S_ISREG(info.st_mode) else None)
    return found


def refused(args, *roots, check=False):
    before = tree(*roots)
    result = run_module("sglang_nccl_settings", args, check=check)
    assert result.get("failed") and not result.get("changed"), result
    assert "module_stderr" not in result and "Traceback" not in result["msg"], result
    assert tree(*roots) == before
    return result["msg"]


@pytest.mark.parametrize("which", [0, 1, 2])  # the hook module, the .pth, the EnvironmentFile
@pytest.mark.parametrize("check", [False, True])
def test_a_delivered_file_replaced_by_a_symlink_is_refused_and_its_target_untouched(setup, which, check):
    args, files, victim = setup
    path = files[which]
    os.unlink(path)
    os.symlink(str(victim), path)
    msg = refused(args, args["venv"], os.path.dirname(args["env_file"]), victim, check=check)
    assert "%s is a symlink (to %s)" % (path, victim) in msg, msg
    assert stat.S_IMODE(os.stat(str(victim)).st_mode) == 0o600


def test_a_symlinked_directory_below_the_venv_is_refused_and_absent_removes_nothing(setup, tmp_path):
    args, files, victim = setup
    site = os.path.dirname(files[0])
    outside = str(tmp_path / "outside-site")
    shutil.move(site, outside)
    os.symlink(outside, site)
    for state in ("present", "absent"):
        msg = refused(dict(args, state=state), args["venv"], outside, os.path.dirname(args["env_file"]), victim)
        assert "%s is a symlink (to %s)" % (site, outside) in msg, msg
