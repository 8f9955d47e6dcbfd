"""module_utils/root_audit.py on real files: every entry below the test's folder that a user other than root can
write is found and named with its rule, parents and link targets included; a root-only tree has none.

The audit walks up to ``/``, and the test's folder sits below pytest's base (``/tmp``, sticky and world-writable):
each test judges the findings inside its own folder, and one test checks that what lies above it is reported as the
real host has it."""
import os
import stat

import pytest

from ansible.module_utils import root_audit as ra

NOBODY = 65534


@pytest.fixture
def base(tmp_path):
    """A root-only folder (0755) standing for ``/opt`` below the test's own folder."""
    base = tmp_path / "opt"
    base.mkdir()
    os.chmod(str(base), 0o755)
    return base


@pytest.fixture
def venv(base):
    """A venv-like tree of root's: bin/python a relative link to an interpreter in a root-only folder beside it."""
    interpreters = base / "python-base"
    interpreters.mkdir()
    (interpreters / "python3").write_text("")
    root = base / "sglang" / "venvs" / "a"
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "site-packages").mkdir(parents=True)
    (root / "lib" / "site-packages" / "sglang_nccl_env.py").write_text("")
    os.symlink("../../../../python-base/python3", str(root / "bin" / "python"))
    os.symlink("venvs/a", str(base / "sglang" / "current"))
    for directory, dirs, files in os.walk(str(base)):
        for name in dirs:
            os.chmod(os.path.join(directory, name), 0o755)
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)
    return root


def inside(findings, folder):
    """The findings at or below FOLDER, as (path, rule, via) tuples."""
    top = str(folder)
    return [(item["path"], item["rule"], item.get("via")) for item in findings
            if item["path"] == top or item["path"].startswith(top + "/")]


def test_a_root_only_tree_has_no_finding_and_every_entry_is_counted(base, venv):
    findings, audited = ra.audit(paths=[str(base / "sglang" / "current" / "bin" / "python")], trees=[str(venv)])
    assert inside(findings, base) == []
    # the venv's chain; current, current/bin, current/bin/python (as given); python-base and python3 (bin/python's
    # target; current's target is the venv); bin, bin/python, lib, site-packages, the hook (the tree): each once
    assert audited == len(ra.root_trust.chain_paths(str(venv))) + 10


def test_the_folders_above_are_reported_as_the_host_has_them(base):
    findings, _ = ra.audit(paths=[str(base)])
    expected = []
    for path in ra.root_trust.chain_paths(str(base.parent)):
        expected += [(item["path"], item["rule"]) for item in ra.entry_findings(path, os.lstat(path))]
    assert [(item["path"], item["rule"]) for item in findings] == expected
    sticky = [path for path in ra.root_trust.chain_paths(str(base.parent))
              if os.lstat(path).st_mode & 0o1002 == 0o1002]
    assert set(sticky) <= set(path for path, rule in expected if rule == ra.OTHER_WRITABLE)


def test_a_planted_group_writable_folder_in_the_chain_is_named(base, venv):
    planted = base / "sglang" / "venvs"
    os.chmod(str(planted), 0o775)
    os.chown(str(planted), 0, NOBODY)
    findings, _ = ra.audit(paths=[str(venv / "lib" / "site-packages" / "sglang_nccl_env.py")])
    assert inside(findings, base) == [(str(planted), ra.GROUP_WRITABLE, None)]
    found = findings[-1]
    assert found["writers"] == ["members of group %s" % ra._group(NOBODY)]
    assert ra.describe(found) == "%s: group-writable (a folder of mode 0775, group %s), writable by members of " \
        "group %s" % (planted, ra._group(NOBODY), ra._group(NOBODY))


def test_group_root_is_not_root_a_group_writable_root_folder_is_named(base, venv):
    os.chmod(str(venv / "lib"), 0o775)
    findings, _ = ra.audit(trees=[str(venv)])
    assert inside(findings, base) == [(str(venv / "lib"), ra.GROUP_WRITABLE, None)]


def test_a_file_another_uid_owns_is_named_on_a_path_and_in_a_tree(base, venv):
    hook = venv / "lib" / "site-packages" / "sglang_nccl_env.py"
    planted = venv / "lib" / "site-packages" / "sitecustomize.py"
    planted.write_text("")
    os.chmod(str(planted), 0o644)
    for path in (hook, planted):
        os.chown(str(path), NOBODY, NOBODY)
    findings, _ = ra.audit(paths=[str(hook)], trees=[str(venv)])
    assert inside(findings, base) == [(str(hook), ra.OWNER, None), (str(planted), ra.OWNER, None)]
    assert findings[-1]["writers"] == [ra._user(NOBODY)]


def test_a_world_writable_parent_is_named_sticky_or_not(base, venv):
    os.chmod(str(base / "sglang"), 0o757)
    findings, _ = ra.audit(paths=[str(venv)])
    assert inside(findings, base) == [(str(base / "sglang"), ra.OTHER_WRITABLE, None)]
    os.chmod(str(base / "sglang"), 0o1757)
    findings, _ = ra.audit(paths=[str(venv)])
    assert inside(findings, base) == [(str(base / "sglang"), ra.OTHER_WRITABLE, None)]
    assert "sticky" in findings[-1]["detail"] and findings[-1]["writers"] == ["every user"]


def test_a_link_planted_in_a_tree_to_a_user_owned_place_is_named_with_its_target(base, venv, tmp_path):
    home = tmp_path / "home" / "sglang"
    home.mkdir(parents=True)
    (home / "python3").write_text("")
    os.chown(str(home), NOBODY, NOBODY)
    link = venv / "bin" / "python"
    os.unlink(str(link))
    os.symlink(str(home / "python3"), str(link))
    findings, _ = ra.audit(trees=[str(venv)])
    assert inside(findings, base) == [(str(link), ra.LINK_TARGET, None)]
    assert inside(findings, home) == [(str(home), ra.OWNER, str(link))]
    assert findings[-1]["writers"][-1] == ra._user(NOBODY)
    assert "reached through the link %s" % link in ra.describe(findings[-2])


def test_a_listed_link_is_audited_through_its_target(base, venv):
    os.chmod(str(venv), 0o775)
    current = base / "sglang" / "current"
    findings, _ = ra.audit(paths=[str(current)])
    assert inside(findings, base) == [(str(venv), ra.GROUP_WRITABLE, str(current)),
                                      (str(current), ra.LINK_TARGET, None)]
    # a path on the way through the link: the same two, once each
    findings, _ = ra.audit(paths=[str(current), str(current / "bin" / "python")])
    assert len(inside(findings, base)) == 2


def test_a_dangling_link_into_a_foreign_folder_is_named(base, venv, tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    os.chmod(str(foreign), 0o757)
    link = venv / "lib" / "site-packages" / "planted.pth"
    os.symlink(str(foreign / "not-yet"), str(link))
    findings, _ = ra.audit(trees=[str(venv)])
    assert inside(findings, tmp_path) == [(str(foreign), ra.OTHER_WRITABLE, str(link)),
                                          (str(link), ra.LINK_TARGET, None)]


def test_a_loop_of_links_ends(base):
    os.symlink("b", str(base / "a"))
    os.symlink("a", str(base / "b"))
    findings, _ = ra.audit(paths=[str(base / "a")], trees=[str(base)])
    assert inside(findings, base) == []


def test_an_absent_path_is_named_and_an_optional_one_still_has_its_parents_audited(base):
    os.chmod(str(base), 0o775)
    missing = base / "state" / "gate-verdict.json"
    findings, _ = ra.audit(paths=[str(missing)])
    assert inside(findings, base) == [(str(base), ra.GROUP_WRITABLE, None), (str(missing), ra.ABSENT, None)]
    assert findings[-1]["detail"] == "%s does not exist" % missing.parent
    findings, _ = ra.audit(optional_paths=[str(missing)])
    assert inside(findings, base) == [(str(base), ra.GROUP_WRITABLE, None)]
    findings, _ = ra.audit(trees=[str(missing)])
    assert inside(findings, base)[-1] == (str(missing), ra.ABSENT, None)


def test_every_finding_is_reported_once(base, venv):
    os.chmod(str(base / "sglang"), 0o777)
    os.chown(str(base / "sglang"), NOBODY, 0)
    findings, _ = ra.audit(paths=[str(venv), str(venv / "bin")], trees=[str(venv)])
    assert inside(findings, base) == [(str(base / "sglang"), ra.OWNER, None),
                                      (str(base / "sglang"), ra.GROUP_WRITABLE, None),
                                      (str(base / "sglang"), ra.OTHER_WRITABLE, None)]


def test_entry_findings_ignore_a_links_mode(tmp_path):
    os.symlink("/", str(tmp_path / "link"))
    info = os.lstat(str(tmp_path / "link"))
    assert stat.S_IMODE(info.st_mode) & 0o022
    assert ra.entry_findings(str(tmp_path / "link"), info) == []
