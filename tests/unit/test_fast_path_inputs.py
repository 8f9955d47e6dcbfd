"""The fast path misses no input (issue 36): every variable a deploy role declares belongs to a capability whose
digest the controller computes, and a digest moves exactly when what it covers does."""
import os

import pytest
import yaml

from action_plugins import sglang_converge_state as plugin

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TABLE = os.path.join(ROOT, "roles", "sglang_fast_path", "vars", "main.yml")
# Roles deploy.yml does not run, and the fast path itself (its switch and the endpoint passed to it): their
# variables change no host a deploy converges.
NOT_DEPLOYED = {"drift_schedule", "gpu_probes", "sglang_drift", "sglang_fast_path"}


def capabilities():
    with open(TABLE, encoding="utf-8") as handle:
        return yaml.safe_load(handle)["__sglang_fast_path_capabilities"]


def deployed_roles():
    return sorted(set(os.listdir(os.path.join(ROOT, "roles"))) - NOT_DEPLOYED)


def declared(role):
    path = os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")
    with open(path, encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    return sorted({name for entry in specs.values() for name in (entry.get("options") or {})})


@pytest.mark.parametrize("role", deployed_roles())
def test_every_variable_a_deployed_role_declares_is_an_input_of_a_capability(role):
    prefixes = tuple(prefix for spec in capabilities().values() for prefix in spec["prefixes"])
    roles = {name for spec in capabilities().values() for name in spec["roles"]}
    missed = [name for name in declared(role) if not name.startswith(prefixes)]
    assert missed == [], "%s: no capability of the fast path covers %s (roles/sglang_fast_path/vars/main.yml)" % (
        role, missed)
    assert role in roles, "%s: its code is no capability's input" % role


def digests(values, selected=None, root=ROOT):
    return plugin.capability_inputs(capabilities(), values, root, selected or {"untagged": True})


def test_a_changed_variable_moves_its_own_capability_only_and_is_named():
    before = digests({"nccl_tuning_settings": {"NCCL_ALGO": "Ring"}, "sglang_server_port": 30000})
    after = digests({"nccl_tuning_settings": {"NCCL_ALGO": "Tree"}, "sglang_server_port": 30000})
    moved = {name for name in before if before[name] != after[name]}
    assert moved == {"nccl"}
    assert before["nccl"]["var nccl_tuning_settings"] != after["nccl"]["var nccl_tuning_settings"]


def tags(run, skip):
    return plugin.tags_selected(capabilities_tags(), run, skip)


def capabilities_tags():
    with open(TABLE, encoding="utf-8") as handle:
        return yaml.safe_load(handle)["__sglang_fast_path_tags"]


def test_tags_that_select_other_work_move_the_code_capability_and_others_do_not():
    plain = digests({}, tags(["all"], []))["code"]
    assert digests({}, tags(["all"], ["benchmark"]))["code"] != plain
    assert digests({}, tags(["benchmark"], []))["code"] != plain
    assert digests({}, tags(["all"], ["molecule-idempotence-notest"]))["code"] == plain
    assert digests({}, tags(None, None))["code"] == plain


def test_every_tag_the_deploy_carries_is_listed():
    carried = set()
    for folder in ("playbooks", "roles"):
        for parent, _dirs, files in os.walk(os.path.join(ROOT, folder)):
            if os.sep + "meta" in parent:
                continue
            for name in files:
                if name.endswith(".yml"):
                    with open(os.path.join(parent, name), encoding="utf-8") as handle:
                        for line in handle:
                            stripped = line.strip()
                            if stripped.startswith("tags:"):
                                carried.update(yaml.safe_load(stripped)["tags"] or [])
    assert carried - {"always"} == set(capabilities_tags())


def test_a_controller_file_a_value_names_counts_with_its_content(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("sglang==0.5.21\n")
    before = digests({"sglang_install_lock": str(lock)})["install"]
    lock.write_text("sglang==0.5.22\n")
    assert digests({"sglang_install_lock": str(lock)})["install"] != before


def test_code_changes_count_and_markdown_does_not(tmp_path):
    role = tmp_path / "roles" / "nccl_tuning" / "tasks"
    role.mkdir(parents=True)
    (role / "main.yml").write_text("---\n")
    plugin._CODE_CACHE.clear()
    before = digests({}, root=str(tmp_path))["nccl"]["role nccl_tuning"]
    (tmp_path / "roles" / "nccl_tuning" / "README.md").write_text("# words\n")
    plugin._CODE_CACHE.clear()
    assert digests({}, root=str(tmp_path))["nccl"]["role nccl_tuning"] == before
    (role / "main.yml").write_text("---\n- name: one more task\n")
    plugin._CODE_CACHE.clear()
    assert digests({}, root=str(tmp_path))["nccl"]["role nccl_tuning"] != before
    plugin._CODE_CACHE.clear()


def test_code_digests_are_computed_when_ansible_imports_the_plugin():
    # Ansible imports an action plugin in its main process before it forks a worker a host: the workers inherit
    # what the import computed, so a fleet hashes the code once a run, not once a host.
    import importlib
    fresh = importlib.reload(plugin)
    root = fresh.project_root()
    folders = fresh.code_folders(root)
    assert os.path.join(root, "roles", "sglang_fast_path") in folders
    assert os.path.join(root, "action_plugins") in folders
    assert sorted(fresh._CODE_CACHE) == sorted(folders)
    warm = dict(fresh._CODE_CACHE)
    fresh._CODE_CACHE.clear()
    assert {folder: fresh.tree_digest(folder) for folder in folders} == warm


def test_an_unreadable_tree_leaves_no_digest_behind(tmp_path):
    (tmp_path / "roles" / "one").mkdir(parents=True)
    (tmp_path / "roles" / "one" / "main.yml").write_text("---\n")
    (tmp_path / "roles" / "two").mkdir()
    (tmp_path / "roles" / "two" / "main.yml").symlink_to(tmp_path / "nowhere.yml")  # open() fails
    plugin._CODE_CACHE.clear()
    plugin.warm_code_digests(str(tmp_path))
    assert plugin._CODE_CACHE == {}
