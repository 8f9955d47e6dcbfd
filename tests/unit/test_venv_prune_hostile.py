"""module_utils/venv_prune.py (and the module) as root against a venvs folder the service user owns and planted in
(tests/helpers/planted.py): a hold file or the state it names that is a FIFO is never opened (it hung the run) and a
link there is not read through, so neither holds a venv; a venv or leftover that is a link loses only the link; links,
FIFOs and hard links inside a removed venv are removed themselves. Nothing outside changes (a decoy tree hashed
before and after)."""
import json
import os

import pytest

from ansible.module_utils import venv_prune as vp
from tests.helpers.ansible_run import run_module
from tests.helpers.planted import Home, as_user, digest, fifo_released, hang_guard


@pytest.fixture
def home():
    """<models>/opt/venvs/lock-{a,b,c}, all complete, current -> lock-c: the service user's."""
    planted = Home()

    def action():
        for index, name in enumerate(["lock-a", "lock-b", "lock-c"]):
            os.makedirs(planted.path("opt", "venvs", name, "bin"))
            with open(planted.path("opt", "venvs", name, vp.COMPLETE), "w") as handle:
                handle.write("sha\n")
            os.utime(planted.path("opt", "venvs", name, vp.COMPLETE), (1000 + index, 1000 + index))
        os.symlink(planted.path("opt", "venvs", "lock-c"), planted.path("opt", "current"))
    planted.plant(action)
    planted.root = planted.path("opt")
    yield planted
    assert planted.decoy_unchanged()
    planted.close()


def plant_hold(home, venv, make):
    def action():
        os.mkdir(home.path("opt", "venvs", venv, vp.KEEP_DIR))
        make(home.path("opt", "venvs", venv, vp.KEEP_DIR, "known-good.json"))
    as_user(action)


def test_a_fifo_as_hold_file_holds_nothing_and_is_never_opened(home):
    plant_hold(home, "lock-a", os.mkfifo)
    with hang_guard(5):
        found = vp.scan(home.root)
    lock_a = [venv for venv in found["venvs"] if venv["name"] == "lock-a"][0]
    assert lock_a["holds"] == [] and lock_a["stale"] == [home.path("opt", "venvs", "lock-a", vp.KEEP_DIR,
                                                                   "known-good.json")]


def test_a_hold_naming_a_fifo_as_its_state_holds_nothing_and_is_never_opened(home):
    fifo = home.path("state.json")
    as_user(lambda: os.mkfifo(fifo))
    plant_hold(home, "lock-a", lambda path: open(path, "w").write(json.dumps({"state": fifo})))
    with hang_guard(5):
        assert vp.holds(home.path("opt", "venvs", "lock-a"))[0] == []


def test_a_linked_state_is_not_read_through(home):
    """The decoy holds a state naming lock-a: reached only through the service user's link, it holds nothing."""
    with open(os.path.join(home.decoy, "state.json"), "w") as handle:
        handle.write(json.dumps({"link": {"target": home.path("opt", "venvs", "lock-a")}}))
    home.before = digest(home.decoy)
    as_user(lambda: os.symlink(os.path.join(home.decoy, "state.json"), home.path("state.json")))
    plant_hold(home, "lock-a", lambda path: open(path, "w").write(json.dumps({"state": home.path("state.json")})))
    assert vp.holds(home.path("opt", "venvs", "lock-a"))[0] == []


def test_the_module_removes_links_fifos_and_hard_links_themselves_never_their_targets(home):
    def action():
        venvs = home.path("opt", "venvs")
        os.symlink(home.decoy, os.path.join(venvs, "lock-0"))  # a venv that is a link
        os.symlink(home.decoy, os.path.join(venvs, vp.REMOVING + "lock-z"))  # a leftover that is a link
        os.symlink(home.decoy, os.path.join(venvs, "lock-a", "bin", "to-decoy"))
        os.symlink(os.path.join(home.decoy, "keys", "id"), os.path.join(venvs, "lock-a", "key"))
        os.mkfifo(os.path.join(venvs, "lock-b", "fifo"))
    as_user(action)
    decoy_file = os.path.join(home.decoy, "config.json")
    os.link(decoy_file, home.path("opt", "venvs", "lock-b", "hard"))  # root plants it (protected_hardlinks)
    with fifo_released(home.path("opt", "venvs", "lock-b", "fifo"), 30):
        result = run_module("sglang_venv_prune", {"root": home.root, "keep": 1})
    assert not result.get("failed"), result
    assert sorted(result["removed"]) == [home.path("opt", "venvs", "lock-a"), home.path("opt", "venvs", "lock-b")]
    assert sorted(os.listdir(home.path("opt", "venvs"))) == ["lock-0", "lock-c"]
    assert os.path.islink(home.path("opt", "venvs", "lock-0"))  # not a venv: left, and nothing behind it entered
    assert os.lstat(decoy_file).st_nlink == 1
