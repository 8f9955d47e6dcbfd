"""The sglang_server_state module through real Ansible: save, check, diff, restore, idempotence, clean refusals."""
import os

from tests.helpers.ansible_run import run_module


def host(tmp_path):
    for name in ("venv-a", "venv-b"):
        (tmp_path / name).mkdir()
    (tmp_path / "venv-a" / ".sglang-fusion-patch").mkdir()
    (tmp_path / "venv-a" / ".sglang-fusion-patch" / "state.json").write_text("{}")
    os.symlink(str(tmp_path / "venv-a"), str(tmp_path / "current"))
    (tmp_path / "unit").write_text("ExecStart=good\n")
    return tmp_path


def saved(root, **extra):
    return dict({"dir": str(root / "known-good"), "link": str(root / "current"),
                 "files": [str(root / "unit"), str(root / "absent.env")], "hold": "known-good"}, **extra)


def test_save_check_then_save_then_nothing_to_do(tmp_path):
    root = host(tmp_path)
    check = run_module("sglang_server_state", saved(root), check=True, diff=True)
    assert check["changed"] and not (root / "known-good").exists(), check
    assert str(root / "unit") in check["diff"]["after"]
    first = run_module("sglang_server_state", saved(root))
    assert first["changed"] and first["link"] == {"path": str(root / "current"), "target": str(root / "venv-a"),
                                                  "patched": True}, first
    assert (root / "venv-a" / ".sglang-keep" / "known-good.json").is_file()
    assert not run_module("sglang_server_state", saved(root))["changed"]


def test_restore_in_check_mode_reports_then_restores(tmp_path):
    root = host(tmp_path)
    run_module("sglang_server_state", saved(root))
    (root / "unit").write_text("ExecStart=bad\n")
    os.unlink(str(root / "current"))
    os.symlink(str(root / "venv-b"), str(root / "current"))
    args = {"dir": str(root / "known-good"), "state": "restored"}
    check = run_module("sglang_server_state", args, check=True)
    assert sorted(a["action"] for a in check["actions"]) == ["relink", "restore"], check
    assert (root / "unit").read_text() == "ExecStart=bad\n"
    done = run_module("sglang_server_state", args)
    assert done["changed"] and (root / "unit").read_text() == "ExecStart=good\n", done
    assert os.path.realpath(str(root / "current")) == str(root / "venv-a")
    assert run_module("sglang_server_state", args)["actions"] == []


def test_bad_input_is_a_message_not_a_traceback(tmp_path):
    root = host(tmp_path)
    missing = run_module("sglang_server_state", {"dir": str(root / "nowhere"), "state": "restored"})
    assert missing["failed"] and missing["msg"].startswith("sglang_server_state: nothing saved"), missing
    assert "Traceback" not in str(missing)
    relative = run_module("sglang_server_state", {"dir": str(root / "kg"), "files": ["unit"]})
    assert relative["failed"] and "absolute" in relative["msg"], relative
    bad_hold = run_module("sglang_server_state", saved(root, hold="../escape"))
    assert bad_hold["failed"] and "plain name" in bad_hold["msg"], bad_hold
    assert not (root / "known-good").exists() and not (root / "kg").exists()
