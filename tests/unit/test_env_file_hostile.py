"""module_utils/env_file.py (sglang_env_file) as root against a folder the service user owns and planted in
(tests/helpers/planted.py): a link, a FIFO or a folder in the file's place is refused naming it (a FIFO never
opened), a hard link to a file outside is renamed over, never written through nor chmodded, and a link planted on
the way is never followed. Nothing outside changes (a decoy tree hashed before and after)."""
import os
import stat

import pytest

from ansible.module_utils import env_file
from tests.helpers.ansible_run import run_module
from tests.helpers.planted import as_user, hang_guard

CONTENT = "SGLANG_X=1\n"


def write(dest, mode="0640"):
    change = env_file.plan(dest, CONTENT, "root", "root", mode)
    env_file.apply(dest, CONTENT, "root", "root", change)
    return change


@pytest.mark.parametrize("kind, rule", [
    ("symlink", r"sglang.env is a symlink \(to .*decoy/keys/id\): an EnvironmentFile is written as a file of its own"),
    ("fifo", r"sglang.env exists and is not a regular file"),
    ("folder", r"sglang.env exists and is not a regular file"),
])
def test_a_planted_entry_in_the_files_place_is_refused_naming_it(home, kind, rule):
    dest = home.path("sglang.env")
    as_user({"symlink": lambda: os.symlink(os.path.join(home.decoy, "keys", "id"), dest),
             "fifo": lambda: os.mkfifo(dest), "folder": lambda: os.mkdir(dest)}[kind])
    with hang_guard(5):
        with pytest.raises(env_file.EnvFileError, match=rule):
            write(dest)


def test_a_hard_link_to_a_file_outside_is_renamed_over(home):
    dest = home.path("sglang.env")
    os.link(os.path.join(home.decoy, "config.json"), dest)  # root plants it (protected_hardlinks)
    write(dest)
    info = os.lstat(dest)
    assert info.st_nlink == 1 and stat.S_IMODE(info.st_mode) == 0o640 and open(dest).read() == CONTENT


def test_a_link_planted_on_the_way_is_not_followed(home):
    as_user(lambda: os.symlink(home.decoy, home.path("etc")))
    with pytest.raises(env_file.EnvFileError, match=r"%s is a symlink \(to %s\) another user could have planted "
                                                    r"\(the link is owned by uid %d\).*; nothing was written" % (
                                                        home.path("etc"), home.decoy, home.uid)):
        write(home.path("etc", "sglang.env"))
    assert not os.path.lexists(os.path.join(home.decoy, "sglang.env"))


def test_the_module_refuses_a_link_planted_on_the_way(home):
    as_user(lambda: os.symlink(home.decoy, home.path("etc")))
    result = run_module("sglang_env_file", {"dest": home.path("etc", "sglang.env"), "content": CONTENT})
    assert result.get("failed") and "%s is a symlink (to %s) another user could have planted" % (
        home.path("etc"), home.decoy) in result["msg"], result
    assert not os.path.lexists(os.path.join(home.decoy, "sglang.env"))
