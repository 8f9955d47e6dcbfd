"""The NCCL start-up hook's module name may not be one the venv's Python already imports (issue 35): a name of the
standard library loads that module instead (the hook never runs), an installed one is shadowed or wins."""
import json
import os
import subprocess
import sys

import pytest

from ansible.module_utils import nccl_delivery as nd
from ansible.module_utils import nccl_tuner as nt

STDLIB = {"os", "json", "typing", "site"}


def site_with(tmp_path, *entries):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for entry in entries:
        path = site / entry
        if entry.endswith("/"):
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    return site


@pytest.mark.parametrize("name", ["typing", "json"])
def test_a_standard_library_name_is_refused(name):
    found = nt.shadow_problems(name, STDLIB, {})
    assert len(found) == 1 and found[0].startswith("hook_name %s is a module of the venv's Python's standard "
                                                   "library" % name) and "never run" in found[0], found


@pytest.mark.parametrize("name", ["sitecustomize", "usercustomize"])
def test_the_names_site_imports_itself_are_refused(name):
    found = nt.shadow_problems(name, STDLIB, {})
    assert len(found) == 1 and "the name site imports for its own customization" in found[0], found


@pytest.mark.parametrize("entries,name,where", [
    (["yaml/", "yaml/__init__.py"], "yaml", "yaml"),
    (["_cffi_backend.cpython-311-x86_64-linux-gnu.so"], "_cffi_backend", "_cffi_backend.cpython-311"),
    (["six.py"], "six", "six.py"),
    (["PyYAML-6.0.dist-info/top_level.txt"], "_yaml", "top_level.txt"),
])
def test_an_installed_module_of_the_venv_is_refused(tmp_path, entries, name, where):
    site = site_with(tmp_path, *entries)
    if entries[0].endswith("top_level.txt"):
        (site / entries[0]).write_text("_yaml\nyaml\n")
    with pytest.raises(nt.Refused) as caught:
        nt.check_hook_name(str(site), name, STDLIB)
    assert "hook_name %s is already an installed module of the venv" % name in caught.value.msg
    assert where in caught.value.msg, caught.value.msg


def test_a_module_on_a_path_a_pth_file_adds_is_refused(tmp_path):
    base = tmp_path / "base-site"
    (base / "torch").mkdir(parents=True)
    site = site_with(tmp_path)
    (site / "_sglang_install_base.pth").write_text(str(base) + "\n")
    with pytest.raises(nt.Refused, match="hook_name torch is already an installed module of the venv"):
        nt.check_hook_name(str(site), "torch", STDLIB)


def test_the_hooks_own_files_and_free_names_pass(tmp_path):
    site = site_with(tmp_path, "sglang/", "numpy/")
    (site / "sglang_nccl_env.py").write_bytes(nd.hook_module({}, "/etc/sglang/nccl.env"))
    (site / "sglang_nccl_env.pth").write_bytes(nd.hook_pth("sglang_nccl_env"))
    nt.check_hook_name(str(site), "sglang_nccl_env", STDLIB)  # a re-run: its own module
    nt.check_hook_name(str(site), "site_nccl_tuning", STDLIB)


def test_without_the_venvs_list_this_interpreters_standard_library_is_used(tmp_path):
    site = site_with(tmp_path)
    with pytest.raises(nt.Refused, match="hook_name json is a module of the venv's Python's standard library"):
        nt.check_hook_name(str(site), "json", None)


def test_the_venvs_python_answers_the_standard_library_query():
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", nt.STDLIB_QUERY], capture_output=True, text=True,
                          check=False)
    names = nt.stdlib_names_from(proc.returncode, proc.stdout)
    assert "os" in names and "typing" in names and "sglang" not in names


@pytest.mark.parametrize("rc,out", [(1, ""), (0, "not json"), (0, "[]"), (0, '{"os": 1}'), (0, "[1, 2]")])
def test_an_answer_that_is_not_a_list_of_names_falls_back(rc, out):
    assert nt.stdlib_names_from(rc, out) is None


def test_plan_refuses_a_shadowing_hook_name_before_writing(tmp_path):
    site = site_with(tmp_path, "yaml/")
    (tmp_path / "bin").mkdir()
    with pytest.raises(nt.Refused, match="hook_name yaml is already an installed module"):
        nt.plan(str(tmp_path), profile="custom", env_file=str(tmp_path / "nccl.env"), hook_name="yaml",
                stdlib_names=sorted(STDLIB))
    assert sorted(os.listdir(str(site))) == ["yaml"] and not (tmp_path / "nccl.env").exists()
    with pytest.raises(nt.Refused, match="hook_name json is a module of the venv's Python's standard library"):
        nt.plan(str(tmp_path), profile="custom", env_file=str(tmp_path / "nccl.env"), hook_name="json",
                stdlib_names=json.loads(json.dumps(sorted(STDLIB))))
