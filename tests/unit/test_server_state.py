"""module_utils/server_state.py: the known-good state is saved whole and put back exactly."""
import os

import pytest

from ansible.module_utils import server_state


def call(_capsys, action, *argv):
    """The old command line's words, mapped onto the library (keeps these cases readable)."""
    opts = {"--file": [], "--glob": []}
    words, single = list(argv), {}
    while words:
        word = words.pop(0)
        if word == "--check":
            single["check"] = True
        elif word in opts:
            opts[word].append(words.pop(0))
        else:
            single[word] = words.pop(0)
    if action == "save":
        files = server_state.expand(opts["--file"], opts["--glob"])
        return server_state.save(single["--dir"], files, single.get("--link"), single.get("--hold"),
                                 single.get("check", False))
    return server_state.restore(single["--dir"], single.get("check", False))


@pytest.fixture
def host(tmp_path):
    for name in ("venv-a", "venv-b"):
        (tmp_path / name / "lib").mkdir(parents=True)
    (tmp_path / "venv-a" / ".sglang-fusion-patch").mkdir()
    (tmp_path / "venv-a" / ".sglang-fusion-patch" / "state.json").write_text("{}")
    os.symlink(str(tmp_path / "venv-a"), str(tmp_path / "current"))
    (tmp_path / "unit").write_text("ExecStart=good\n")
    os.chmod(str(tmp_path / "unit"), 0o640)
    (tmp_path / "hook.py").write_text("NCCL_P2P_LEVEL=PHB\n")
    return tmp_path


def save(capsys, host):
    return call(capsys, "save", "--dir", str(host / "known-good"), "--link", str(host / "current"),
                "--file", str(host / "unit"), "--file", str(host / "absent.env"), "--glob", str(host / "hook.*"))


def test_restore_puts_back_files_mode_link_and_removes_what_was_absent(host, capsys):
    saved = save(capsys, host)
    assert saved["link"] == {"path": str(host / "current"), "target": str(host / "venv-a"), "patched": True}
    (host / "unit").write_text("ExecStart=bad\n")
    os.chmod(str(host / "unit"), 0o644)
    (host / "hook.py").write_text("NCCL_ALGO=Tree\n")
    (host / "absent.env").write_text("X=1\n")
    os.unlink(str(host / "current"))
    os.symlink(str(host / "venv-b"), str(host / "current"))

    check = call(capsys, "restore", "--dir", str(host / "known-good"), "--check")
    assert check["changed"] and (host / "unit").read_text() == "ExecStart=bad\n"
    done = call(capsys, "restore", "--dir", str(host / "known-good"))
    assert sorted(a["action"] for a in done["actions"]) == ["relink", "remove", "restore", "restore"]
    assert (host / "unit").read_text() == "ExecStart=good\n"
    assert os.stat(str(host / "unit")).st_mode & 0o777 == 0o640
    assert (host / "hook.py").read_text() == "NCCL_P2P_LEVEL=PHB\n"
    assert not (host / "absent.env").exists()
    assert os.path.realpath(str(host / "current")) == str(host / "venv-a")
    assert call(capsys, "restore", "--dir", str(host / "known-good"))["changed"] is False


def test_a_new_save_replaces_the_old_state_whole(host, capsys):
    assert save(capsys, host)["changed"] is True
    assert save(capsys, host)["changed"] is False  # the same state: nothing rewritten
    (host / "unit").write_text("ExecStart=newer\n")
    assert save(capsys, host)["changed"] is True
    (host / "unit").write_text("ExecStart=bad\n")
    call(capsys, "restore", "--dir", str(host / "known-good"))
    assert (host / "unit").read_text() == "ExecStart=newer\n"
    assert not os.path.exists(str(host / "known-good.old"))


def test_restore_refuses_when_the_saved_venv_is_gone(host, capsys):
    save(capsys, host)
    os.unlink(str(host / "current"))
    os.symlink(str(host / "venv-b"), str(host / "current"))
    os.rename(str(host / "venv-a"), str(host / "venv-a.pruned"))
    (host / "unit").write_text("ExecStart=bad\n")
    with pytest.raises(server_state.StateError, match="is gone"):
        server_state.restore(str(host / "known-good"))
    assert os.path.realpath(str(host / "current")) == str(host / "venv-b")
    assert (host / "unit").read_text() == "ExecStart=bad\n"  # nothing half-restored


def test_save_with_hold_keeps_the_venv_from_the_pruner_while_the_state_names_it(host, capsys):
    from ansible.module_utils import venv_prune
    args = ["save", "--dir", str(host / "known-good"), "--link", str(host / "current"), "--hold", "known-good"]
    assert call(capsys, *args)["changed"] is True
    assert venv_prune.holds(str(host / "venv-a")) == ([str(host / "known-good" / "state.json")], [])
    assert call(capsys, *args)["changed"] is False  # same state, hold already there
    # The next known-good is venv-b: venv-b is held now, venv-a's hold is stale.
    os.unlink(str(host / "current"))
    os.symlink(str(host / "venv-b"), str(host / "current"))
    assert call(capsys, *args)["changed"] is True
    assert venv_prune.holds(str(host / "venv-b"))[0] == [str(host / "known-good" / "state.json")]
    assert venv_prune.holds(str(host / "venv-a")) == ([], [str(host / "venv-a" / ".sglang-keep" / "known-good.json")])


def test_check_mode_save_writes_nothing(host, capsys):
    result = call(capsys, "save", "--dir", str(host / "known-good"), "--link", str(host / "current"),
                  "--file", str(host / "unit"), "--hold", "known-good", "--check")
    assert result["changed"] is True
    assert not (host / "known-good").exists()
    assert not (host / "venv-a" / ".sglang-keep").exists()


def test_refusals_before_anything_is_written(host, tmp_path):
    with pytest.raises(server_state.StateError, match="absolute"):
        server_state.save("relative/dir", [])
    with pytest.raises(server_state.StateError, match="absolute"):
        server_state.save(str(host / "known-good"), ["unit"])
    with pytest.raises(server_state.StateError, match="not a symlink"):
        server_state.save(str(host / "known-good"), [], link=str(host / "unit"))
    with pytest.raises(server_state.StateError, match="nothing saved"):
        server_state.restore(str(host / "nowhere"))
    (host / "broken").mkdir()
    (host / "broken" / "state.json").write_text("{not json")
    with pytest.raises(server_state.StateError, match="not a saved state"):
        server_state.restore(str(host / "broken"))
    assert not (host / "known-good").exists()


def test_patch_state_path_is_the_patchers_and_the_layouts():
    """The fusion patch record is named once in Python (fusion_patcher) and mirrored once for the roles."""
    import yaml
    from ansible.module_utils import fusion_patcher
    layout = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "sglang_layout", "defaults", "main.yml")
    with open(layout, encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["sglang_layout_fusion_state"] == server_state.PATCH_STATE
    assert server_state.PATCH_STATE.startswith(fusion_patcher.STATE_DIR_NAME + os.sep)


def test_query_says_whether_a_state_is_saved_and_touches_nothing(host, capsys):
    folder = str(host / "known-good")
    assert server_state.query(folder) == {"changed": False, "exists": False, "saved_at": None, "link": None}
    saved = save(capsys, host)
    found = server_state.query(folder)
    assert found["exists"] and found["link"]["target"] == str(host / "venv-a") and found["link"]["patched"]
    assert found["saved_at"] and found["changed"] is False
    assert server_state.query(folder) == found and saved["changed"]
    (host / "known-good" / "state.json").write_text("not json")
    with pytest.raises(server_state.StateError, match="is not a saved state"):
        server_state.query(folder)
