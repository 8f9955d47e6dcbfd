"""The NCCL layer's file handling on real directories: no mode, owner or write reaches a symlink's target."""
import os
import stat

import pytest

from ansible.module_utils import atomic_files as af
from ansible.module_utils import nccl_tuner


@pytest.fixture
def venv(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"secret\n")
    os.chmod(str(victim), 0o600)
    return tmp_path / "venv", site, victim


def test_enforce_modes_never_changes_a_links_target(venv):
    _venv, site, victim = venv
    hook = site / "sglang_nccl_env.pth"
    os.symlink(str(victim), str(hook))
    assert nccl_tuner.mode_problems([str(hook)]) == [str(hook)]  # a link is not a delivered file
    with pytest.raises(af.UnsafePath,
                       match=r"sglang_nccl_env.pth is a symlink \(to .*victim\): its owner and mode were not set"):
        nccl_tuner.enforce_modes([str(hook)])
    assert stat.S_IMODE(os.stat(str(victim)).st_mode) == 0o600 and os.path.islink(str(hook))


def test_enforce_modes_sets_mode_on_the_file_itself(venv):
    _venv, site, _victim = venv
    hook = site / "sglang_nccl_env.py"
    hook.write_text("x = 1\n")
    os.chmod(str(hook), 0o666)
    assert nccl_tuner.mode_problems([str(hook), str(site / "absent.pth")]) == [str(hook)]
    nccl_tuner.enforce_modes([str(hook)])
    assert stat.S_IMODE(os.stat(str(hook)).st_mode) == 0o644 and nccl_tuner.mode_problems([str(hook)]) == []


def test_link_problems_name_links_below_the_venv_and_an_env_file_that_is_one(venv, tmp_path):
    root, site, victim = venv
    hook = str(site / "sglang_nccl_env.py")
    env_file = str(tmp_path / "etc" / "nccl.env")
    os.makedirs(os.path.dirname(env_file))
    assert nccl_tuner.link_problems(str(root), [hook, env_file]) == []
    os.symlink(str(victim), env_file)
    outside = tmp_path / "elsewhere"
    os.rename(str(root / "lib"), str(outside))
    os.symlink(str(outside), str(root / "lib"))
    problems = nccl_tuner.link_problems(str(root), [hook, env_file])
    assert len(problems) == 2
    assert problems[0].startswith("%s is a symlink (to %s)" % (root / "lib", outside))
    assert problems[1].startswith("%s is a symlink (to %s)" % (env_file, victim))
    # An EnvironmentFile's directory is the operator's to place: a link there is no problem.
    os.unlink(env_file)
    os.rename(str(tmp_path / "etc"), str(tmp_path / "etc-real"))
    os.symlink(str(tmp_path / "etc-real"), str(tmp_path / "etc"))
    assert nccl_tuner.link_problems(str(root), [env_file]) == []
    roots = nccl_tuner.write_roots(str(root), [hook, env_file])
    assert roots == {hook: str(root), env_file: str(tmp_path / "etc")}
