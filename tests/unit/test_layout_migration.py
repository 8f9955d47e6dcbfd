"""The move from the earlier layout (records and models tree in the service user's home) to root's folders, as root
against a home the service user planted (tests/helpers/planted.py): what root wrote moves whole; a link, a FIFO, a
file of the service user's or a second name is refused naming the path and the rule, put back where it was, and the
world outside (a decoy tree) stays as it was."""
import os

import pytest

from ansible.module_utils import layout_migration as lm
from tests.helpers.planted import Home, hang_guard


@pytest.fixture
def home():
    planted = Home()
    state = os.path.join(planted.base, "deploy")
    planted.state = state
    planted.home = os.path.dirname(planted.models)
    yield planted
    planted.close()


def _root_file(path, data=b"{}", mode=0o644):
    with open(path, "wb") as handle:
        handle.write(data)
    os.chmod(path, mode)


def _migrate(home, names, check=False):
    lm.ensure_folder(home.state, check)
    return [lm.move(os.path.join(home.home, name), os.path.join(home.state, name), check) for name in names]


def test_records_and_a_folder_of_root_move_whole_and_a_second_run_moves_nothing(home):
    _root_file(os.path.join(home.home, ".deployed-config"), b"fingerprint", 0o600)
    os.mkdir(os.path.join(home.home, "known-good"), 0o755)
    _root_file(os.path.join(home.home, "known-good", "state.json"))
    assert _migrate(home, [".deployed-config", "known-good", "gate-verdict.json"]) == ["moved", "moved", "absent"]
    with open(os.path.join(home.state, ".deployed-config"), "rb") as handle:
        assert handle.read() == b"fingerprint"
    assert os.stat(os.path.join(home.state, ".deployed-config")).st_mode & 0o777 == 0o600
    assert os.path.isfile(os.path.join(home.state, "known-good", "state.json"))
    assert not os.path.lexists(os.path.join(home.home, "known-good"))
    assert _migrate(home, [".deployed-config", "known-good"]) == ["absent", "absent"]


def test_the_state_folder_is_made_roots_0755_once(home):
    os.umask(0o077)
    try:
        assert lm.ensure_folder(home.state, check=True) and not os.path.exists(home.state)
        assert lm.ensure_folder(home.state) and not lm.ensure_folder(home.state)
    finally:
        os.umask(0o022)
    info = os.stat(home.state)
    assert (info.st_uid, info.st_mode & 0o777) == (0, 0o755)


def test_check_mode_moves_nothing(home):
    _root_file(os.path.join(home.home, "converged.json"))
    os.mkdir(home.state, 0o755)
    assert _migrate(home, ["converged.json"], check=True) == ["would move"]
    assert os.path.exists(os.path.join(home.home, "converged.json"))
    assert not os.path.exists(os.path.join(home.state, "converged.json"))


def test_a_record_already_in_its_new_place_is_kept_and_the_old_one_left(home):
    os.mkdir(home.state, 0o755)
    _root_file(os.path.join(home.home, "gate-verdict.json"), b"old")
    _root_file(os.path.join(home.state, "gate-verdict.json"), b"new")
    assert _migrate(home, ["gate-verdict.json"]) == ["kept"]
    with open(os.path.join(home.state, "gate-verdict.json"), "rb") as handle:
        assert handle.read() == b"new"


def test_the_models_tree_moves_to_its_own_root_folder(home):
    os.makedirs(os.path.join(home.models, "m", "r1"), 0o755)
    _root_file(os.path.join(home.models, "m", "r1", "model.safetensors"), b"w" * 100)
    os.symlink("r1", os.path.join(home.models, "m", "current"))
    new = os.path.join(home.base, "models")
    with pytest.raises(lm.MigrationRefused) as refused:
        lm.move(home.models, new)
    # the models folder of today's layout is the service user's: refused and left where it was
    assert "owned by uid %d" % home.uid in str(refused.value)
    assert os.path.isdir(home.models) and not os.path.exists(new)


def _root_models(home, name="root-models"):
    """A models tree as root's fetch leaves it: <model>/<revision>/ files, <model>/current -> <revision>."""
    tree = os.path.join(home.home, name)
    os.makedirs(os.path.join(tree, "m", "r1"), 0o755)
    os.chmod(tree, 0o755)
    _root_file(os.path.join(tree, "m", "r1", "model.safetensors"), b"w" * 100)
    os.symlink("r1", os.path.join(tree, "m", "current"))
    return tree


def test_a_models_tree_of_roots_moves_with_its_current_links(home):
    new = os.path.join(home.base, "models")
    assert lm.move(_root_models(home), new) == "moved"
    assert os.readlink(os.path.join(new, "m", "current")) == "r1"
    assert os.path.isfile(os.path.join(new, "m", "current", "model.safetensors"))


@pytest.mark.parametrize("target", ["/etc", "../..", "..", "r1/../../x"])
def test_a_link_out_of_its_folder_inside_the_models_tree_is_put_back(home, target):
    tree = _root_models(home)
    os.symlink(target, os.path.join(tree, "m", "escape"))
    new = os.path.join(home.base, "models")
    with pytest.raises(lm.MigrationRefused) as refused:
        lm.move(tree, new)
    assert "escape is a symbolic link to %s" % target in str(refused.value) and "put back" in str(refused.value)
    assert os.path.isdir(tree) and not os.path.exists(new)


def test_a_moved_entry_that_is_itself_a_link_to_a_sibling_is_refused(home):
    os.mkdir(home.state, 0o755)
    os.mkdir(os.path.join(home.home, "elsewhere"), 0o755)
    os.symlink("elsewhere", os.path.join(home.home, "known-good"))
    with pytest.raises(lm.MigrationRefused) as refused:
        _migrate(home, ["known-good"])
    assert "known-good is a symbolic link" in str(refused.value)


@pytest.mark.parametrize("plant, rule", [
    (lambda p: os.symlink("/etc/shadow", p), "a symbolic link"),
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: _root_file(p), "owned by uid"),
])
def test_a_planted_record_is_refused_naming_path_and_rule(home, plant, rule):
    record = os.path.join(home.home, "gate-verdict.json")
    home.plant(lambda: plant(record))
    with hang_guard(10), pytest.raises(lm.MigrationRefused) as refused:
        _migrate(home, ["gate-verdict.json"])
    assert record in str(refused.value) and rule in str(refused.value)
    assert os.path.lexists(record) and not os.path.lexists(os.path.join(home.state, "gate-verdict.json"))
    assert home.decoy_unchanged()


def test_a_hard_link_to_a_file_elsewhere_is_refused(home):
    key = os.path.join(home.decoy, "keys", "id")
    os.link(key, os.path.join(home.home, ".fingerprint-salt"))
    with pytest.raises(lm.MigrationRefused) as refused:
        _migrate(home, [".fingerprint-salt"])
    assert "2 names" in str(refused.value)
    assert home.decoy_unchanged()


@pytest.mark.parametrize("plant, rule", [
    (lambda d: os.symlink("/etc", os.path.join(d, "escape")), "a symbolic link"),
    (lambda d: os.mkfifo(os.path.join(d, "pipe")), "a FIFO"),
    (lambda d: _root_file(os.path.join(d, "verdict.json")), "owned by uid"),
])
def test_a_root_folder_holding_what_the_service_user_planted_is_put_back(home, plant, rule):
    folder = os.path.join(home.home, "known-good")
    os.mkdir(folder, 0o755)
    _root_file(os.path.join(folder, "state.json"))
    os.chown(folder, home.uid, home.gid)  # theirs while they plant, root's again after: only the content is theirs
    home.plant(lambda: plant(folder))
    os.chown(folder, 0, 0)
    with hang_guard(10), pytest.raises(lm.MigrationRefused) as refused:
        _migrate(home, ["known-good"])
    assert "put back" in str(refused.value) and rule in str(refused.value)
    assert os.path.isdir(folder) and not os.path.lexists(os.path.join(home.state, "known-good"))
    assert home.decoy_unchanged()


def test_a_group_writable_record_is_refused(home):
    _root_file(os.path.join(home.home, "restarts.log"), b"", 0o664)
    with pytest.raises(lm.MigrationRefused) as refused:
        _migrate(home, ["restarts.log"])
    assert "writable by group or others" in str(refused.value)


def test_a_destination_the_service_user_can_change_is_refused(home):
    _root_file(os.path.join(home.home, "converged.json"))
    theirs = os.path.join(home.base, "theirs")
    os.mkdir(theirs, 0o755)
    os.chown(theirs, home.uid, home.gid)
    with pytest.raises(lm.MigrationRefused) as refused:
        lm.move(os.path.join(home.home, "converged.json"), os.path.join(theirs, "converged.json"))
    assert theirs in str(refused.value) and "owned by uid" in str(refused.value)
    assert os.path.exists(os.path.join(home.home, "converged.json"))


def test_an_empty_folder_at_the_destination_is_replaced(home):
    os.makedirs(os.path.join(home.home, "old", "m"), 0o755)
    os.chmod(os.path.join(home.home, "old"), 0o755)
    empty = os.path.join(home.base, "models")
    os.mkdir(empty, 0o755)
    assert lm.move(os.path.join(home.home, "old"), empty) == "moved"
    assert os.path.isdir(os.path.join(empty, "m"))


def test_plan_adds_every_name_a_pattern_matches_whole(tmp_path):
    for name in ("fusion-canary.json", "pcie-ipc-canary.json", "fusion-canary.json.bak", "notes"):
        (tmp_path / name).write_text("{}")
    pairs = lm.plan([("/a/x", "/b/x")], [(str(tmp_path), "/new", "*-canary.json")])
    assert pairs == [("/a/x", "/b/x"), (str(tmp_path / "fusion-canary.json"), "/new/fusion-canary.json"),
                     (str(tmp_path / "pcie-ipc-canary.json"), "/new/pcie-ipc-canary.json")]
    assert lm.plan([], [("/no/such/dir", "/new", "*")]) == []
