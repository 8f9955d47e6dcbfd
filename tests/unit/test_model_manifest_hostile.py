"""module_utils/model_manifest_writer.py (sglang_model_manifest) as root against a model folder the service user
owns and planted in (tests/helpers/planted.py): a link or FIFO in the folder is refused naming it (never followed,
never opened), a link or FIFO at dest is refused, a hard link at dest is renamed over, and a link planted on the way to
dest is never followed. Nothing outside changes (a decoy tree hashed before and after)."""
import os

import pytest

from ansible.module_utils import model_manifest_writer as mw
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.ansible_run import run_module
from tests.helpers.planted import Home, as_user, hang_guard


@pytest.fixture
def home():
    """<models>/m/r1 with two files, the service user's."""
    planted = Home()

    def action():
        os.makedirs(planted.path("m", "r1"))
        for name, data in (("config.json", b"{}"), ("model.safetensors", b"w" * 64)):
            with open(planted.path("m", "r1", name), "wb") as handle:
                handle.write(data)
    planted.plant(action)
    yield planted
    assert planted.decoy_unchanged()
    planted.close()


def test_a_link_and_a_fifo_in_the_folder_are_refused_never_followed_or_opened(home):
    def action():
        os.symlink(os.path.join(home.decoy, "keys", "id"), home.path("m", "r1", "key.bin"))
        os.symlink(home.decoy, home.path("m", "r1", "linked"))
        os.mkfifo(home.path("m", "r1", "pipe"))
    as_user(action)
    with hang_guard(5):
        with pytest.raises(ModelError) as refused:
            mw.make(home.path("m", "r1"))
    message = str(refused.value)
    assert "key.bin is a symlink (to %s)" % os.path.join(home.decoy, "keys", "id") in message
    assert "linked is a symlink" in message and "pipe is a FIFO" in message and "nothing was written" in message
    assert not os.path.lexists(home.path("m", "r1", "manifest.json"))


@pytest.mark.parametrize("kind, rule", [("symlink", "manifest.json is a symlink"),
                                        ("fifo", "manifest.json is a FIFO, not a manifest file")])
def test_a_link_or_fifo_at_dest_is_refused_and_left(home, kind, rule):
    dest = home.path("m", "r1", "manifest.json")
    as_user((lambda: os.symlink(os.path.join(home.decoy, "config.json"), dest)) if kind == "symlink" else
            (lambda: os.mkfifo(dest)))
    with hang_guard(5):
        with pytest.raises(ModelError, match=rule):
            mw.make(home.path("m", "r1"))
    assert os.path.lexists(dest)


def test_a_hard_link_at_dest_is_renamed_over(home):
    dest = home.path("m", "manifest.json")
    os.link(os.path.join(home.decoy, "config.json"), dest)  # root plants it (protected_hardlinks)
    assert mw.make(home.path("m", "r1"), dest)["changed"]
    assert os.lstat(dest).st_nlink == 1


def test_a_link_planted_on_the_way_to_dest_is_not_followed(home):
    as_user(lambda: os.symlink(home.decoy, home.path("out")))
    dest = home.path("out", "manifest.json")
    with pytest.raises(ModelError, match=r"dest %s: %s is a symlink \(to %s\) another user could have planted" % (
            dest, home.path("out"), home.decoy)):
        mw.make(home.path("m", "r1"), dest)
    result = run_module("sglang_model_manifest", {"path": home.path("m", "r1"), "dest": dest})
    assert result.get("failed") and "%s is a symlink (to %s) another user could have planted" % (
        home.path("out"), home.decoy) in result["msg"], result
    assert not os.path.lexists(os.path.join(home.decoy, "manifest.json"))
