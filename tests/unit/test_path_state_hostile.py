"""module_utils/path_state.py (sglang_paths) as root against a folder the service user owns and planted in
(tests/helpers/planted.py), as the FlashInfer workspace in its home is: a link, a FIFO or a file where a directory is
wanted is refused naming it; a link planted on the way is never followed (no directory made, chowned or chmodded
behind it); a file to remove that is a link is removed itself. Nothing outside changes (a decoy tree hashed before
and after)."""
import grp
import os

import pytest

from ansible.module_utils import path_state
from tests.helpers.ansible_run import run_module
from tests.helpers.planted import as_user


def wanted(path, mode="0750"):
    return {"path": path, "owner": "nobody", "group": "nogroup" if _has_group("nogroup") else "nobody", "mode": mode}


def _has_group(name):
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


def run(directories, absent=()):
    changes, entries = path_state.plan(directories, list(absent))
    path_state.apply(changes, entries)
    return changes


@pytest.mark.parametrize("kind, rule", [
    ("symlink", r"workspace is a symlink \(to .*decoy/keys\): no owner or mode is set through a link"),
    ("fifo", r"workspace exists and is not a directory"),
    ("file", r"workspace exists and is not a directory"),
])
def test_a_planted_entry_where_a_directory_is_wanted_is_refused_naming_it(home, kind, rule):
    target = home.path("workspace")
    as_user({"symlink": lambda: os.symlink(os.path.join(home.decoy, "keys"), target),
             "fifo": lambda: os.mkfifo(target),
             "file": lambda: open(target, "w").close()}[kind])
    with pytest.raises(path_state.PathError, match=rule):
        run([wanted(target)])


def test_a_link_planted_on_the_way_is_not_followed(home):
    as_user(lambda: os.symlink(home.decoy, home.path("cache")))
    with pytest.raises(path_state.PathError, match=r"%s is a symlink \(to %s\) another user could have planted "
                                                   r"\(the link is owned by uid %d\): root follows no such link on the "
                                                   r"way to .*; nothing was changed" % (
                                                       home.path("cache"), home.decoy, home.uid)):
        run([wanted(home.path("cache", "workspace"))])
    assert not os.path.lexists(os.path.join(home.decoy, "workspace"))


def test_a_link_to_remove_is_removed_itself(home):
    as_user(lambda: os.symlink(os.path.join(home.decoy, "keys", "id"), home.path("old.env")))
    assert run([], [home.path("old.env")]) == [(home.path("old.env"), "remove", "symlink or special file")]
    assert not os.path.lexists(home.path("old.env"))


def test_the_module_refuses_a_root_owned_link_in_a_folder_the_service_user_can_change(home):
    os.symlink(home.decoy, home.path("cache"))  # root's own link: the service user can still replace it
    result = run_module("sglang_paths", {"directories": [wanted(home.path("cache", "workspace"))]})
    assert result.get("failed") and "%s is a symlink (to %s) another user could have planted (%s is owned by uid %d, not 0)" % (
        home.path("cache"), home.decoy, os.path.dirname(home.models), home.uid) in result["msg"], result
    assert not os.path.lexists(os.path.join(home.decoy, "workspace"))
