"""sglang_root_audit through real Ansible (ad-hoc, local connection): a planted group-writable folder fails the
audit with a message naming it, check mode answers the same, bad input gets the module's own message.

The test's folder sits below pytest's base (``/tmp``, sticky and world-writable, which the audit refuses): findings
above the test's folder are the host's own and are checked to be nothing else."""
import os

from tests.helpers.ansible_run import run_module


def tree(tmp_path):
    """A root-only opt/sglang/venvs/a with a file and a relative current link, below the test's folder."""
    venv = tmp_path / "opt" / "sglang" / "venvs" / "a"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("")
    os.symlink("venvs/a", str(tmp_path / "opt" / "sglang" / "current"))
    for folder in (tmp_path / "opt", tmp_path / "opt" / "sglang", venv.parent, venv, venv / "bin"):
        os.chmod(str(folder), 0o755)
    return venv


def own(findings, tmp_path):
    """The findings inside the test's folder; every other one must be a folder above it."""
    above = [item["path"] for item in findings if not item["path"].startswith(str(tmp_path) + "/")]
    assert all(str(tmp_path).startswith(path.rstrip("/") + "/") or path == str(tmp_path) for path in above), above
    return [(item["path"], item["rule"]) for item in findings if item["path"] not in above]


def test_a_planted_group_writable_folder_fails_the_audit_and_is_named(tmp_path):
    venv = tree(tmp_path)
    args = {"paths": [str(tmp_path / "opt" / "sglang" / "current")], "trees": [str(venv)]}
    clean = run_module("sglang_root_audit", args)
    assert own(clean.get("findings", []), tmp_path) == [] and clean["changed"] is False
    os.chmod(str(venv.parent), 0o775)
    for check in (False, True):
        failed = run_module("sglang_root_audit", args, check=check)
        assert failed["failed"] and failed["changed"] is False
        # the venvs folder, reached through current (listed) and as the tree's parent, and the link that leads there
        assert own(failed["findings"], tmp_path) == [(str(venv.parent), "group-writable"),
                                                     (str(tmp_path / "opt" / "sglang" / "current"), "link-target")]
        assert "%s: group-writable (a folder of mode 0775" % venv.parent in failed["msg"]
        assert failed["audited"] == clean["audited"]


def test_an_absent_path_fails_unless_optional(tmp_path):
    tree(tmp_path)
    missing = str(tmp_path / "opt" / "sglang" / "gate-verdict.json")
    failed = run_module("sglang_root_audit", {"paths": [missing]})
    assert own(failed["findings"], tmp_path) == [(missing, "absent")]
    optional = run_module("sglang_root_audit", {"optional_paths": [missing]})
    assert own(optional.get("findings", []), tmp_path) == []


def test_bad_input_gets_the_modules_own_message():
    relative = run_module("sglang_root_audit", {"paths": ["opt/sglang"], "trees": ["/opt"]})
    assert relative["failed"] and relative["msg"] == (
        "sglang_root_audit audits absolute paths only, got paths: opt/sglang")
    empty = run_module("sglang_root_audit", {"paths": [], "trees": []})
    assert empty["failed"] and "was given nothing to audit" in empty["msg"]
    nul = run_module("sglang_root_audit", {"trees": ["/opt\x00x"]})
    assert nul["failed"] and nul["msg"].startswith("sglang_root_audit refused its arguments")
    assert "trees[0]" in nul["msg"]
