"""module_utils/nccl_tuner.py (sglang_nccl_settings' planning and removal) as root against a venv and an env-file
folder the service user owns and planted in (tests/helpers/planted.py): a FIFO as a delivered file or a .pth file is
never opened (it hung the run), a link there is refused naming it, a folder in a file's place is refused; a hard
link to a file outside is replaced by the rename, never written through. Nothing outside changes (a decoy tree
hashed before and after)."""
import os

import pytest

from ansible.module_utils import atomic_files as af
from ansible.module_utils import nccl_tuner as nt
from tests.helpers.planted import Home, as_user, hang_guard

HOOK = "sglang_nccl_env"


@pytest.fixture
def home():
    """<models>/venv/lib/python3.11/site-packages and <models>/etc, the service user's."""
    planted = Home()

    def action():
        os.makedirs(planted.path("venv", "lib", "python3.11", "site-packages"))
        os.makedirs(planted.path("venv", "bin"))
        os.mkdir(planted.path("etc"))
    planted.plant(action)
    planted.site = planted.path("venv", "lib", "python3.11", "site-packages")
    planted.env = planted.path("etc", "nccl.env")
    yield planted
    assert planted.decoy_unchanged()
    planted.close()


def plan(home):
    return nt.plan(home.path("venv"), profile="pcie", env_file=home.env, hook_name=HOOK)


def delivered(home, which):
    return {"hook": os.path.join(home.site, HOOK + ".py"), "pth": os.path.join(home.site, HOOK + ".pth"),
            "env": home.env}[which]


@pytest.mark.parametrize("which", ["hook", "pth", "env"])
def test_a_fifo_as_a_delivered_file_is_refused_never_opened(home, which):
    path = delivered(home, which)
    as_user(lambda: os.mkfifo(path))
    for run in (lambda: plan(home), lambda: nt.removal(home.path("venv"), home.env, HOOK)):
        with hang_guard(5):
            with pytest.raises(nt.Refused, match="%s is a FIFO, not a regular file: it is never opened" % path):
                run()


@pytest.mark.parametrize("which", ["hook", "pth", "env"])
def test_a_link_as_a_delivered_file_is_refused_naming_it(home, which):
    path = delivered(home, which)
    as_user(lambda: os.symlink(os.path.join(home.decoy, "keys", "id"), path))
    for run in (lambda: plan(home), lambda: nt.removal(home.path("venv"), home.env, HOOK)):
        with pytest.raises(nt.Refused, match="%s is a symlink" % path):
            run()


def test_a_folder_as_the_hook_is_refused(home):
    path = delivered(home, "hook")
    as_user(lambda: os.mkdir(path))
    with pytest.raises(nt.Refused, match="%s is a folder, not a regular file" % path):
        plan(home)


def test_a_fifo_among_the_pth_files_is_skipped_not_opened(home):
    as_user(lambda: os.mkfifo(os.path.join(home.site, "planted.pth")))
    with hang_guard(5):
        assert nt.search_dirs(home.site) == [home.site]
        plan(home)


def test_a_hard_link_to_a_file_outside_is_renamed_over(home):
    os.link(os.path.join(home.decoy, "config.json"), home.env)  # root plants it (protected_hardlinks)
    result, changes = plan(home)
    af.replace_all(changes, root=nt.write_roots(home.path("venv"), result["files"]))
    assert os.lstat(home.env).st_nlink == 1 and b"NCCL" in open(home.env, "rb").read()
