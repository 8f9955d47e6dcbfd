"""scripts/build_collection.py: the transforms that turn the checkout into the gpufleet.sglang collection."""
import ast
import os
import textwrap

import pytest
import yaml
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
bc = load_file("scripts/build_collection.py", "build_collection")

TARGET = "ansible_collections.ns.coll.plugins.module_utils"
FQCN = "ns.coll."


def fq(text, kind="tasks", modules=("my_mod",), roles=("my_role",), playbooks=("bench",)):
    return bc.fqcn_yaml(textwrap.dedent(text), kind, FQCN, modules, roles, playbooks)


# --- Python imports ------------------------------------------------------------------------------------------

def test_own_utils_imports_point_at_the_collection_and_core_ones_stay():
    source = textwrap.dedent("""\
        from ansible.module_utils.basic import AnsibleModule
        from ansible.module_utils import atomic_files
        from ansible.module_utils import pkg_versions as pv, nccl_settings
        from ansible.module_utils.atomic_files import write_atomic  # pylint: disable=import-error
        from ansible.module_utils.common.text.converters import to_text
        import json
    """)
    out = bc.rewrite_imports(source, {"atomic_files", "pkg_versions", "nccl_settings"}, TARGET)
    assert out.splitlines() == [
        "from ansible.module_utils.basic import AnsibleModule",
        "from %s import atomic_files" % TARGET,
        "from %s import pkg_versions as pv, nccl_settings" % TARGET,
        "from %s.atomic_files import write_atomic  # pylint: disable=import-error" % TARGET,
        "from ansible.module_utils.common.text.converters import to_text",
        "import json",
    ]


def test_a_util_named_like_a_prefix_of_another_is_not_touched_by_accident():
    source = "from ansible.module_utils.atomic_files_extra import x\nfrom ansible.module_utils import basic\n"
    assert bc.rewrite_imports(source, {"atomic_files"}, TARGET) == source


def test_parenthesised_multiline_import_is_rewritten_on_its_first_line():
    source = "from ansible.module_utils import (\n    atomic_files,\n    venv_prune,\n)\n"
    out = bc.rewrite_imports(source, {"atomic_files", "venv_prune"}, TARGET)
    assert out.startswith("from %s import (\n" % TARGET)
    ast.parse(out)


def test_an_import_mixing_own_and_core_utils_is_refused():
    with pytest.raises(bc.BuildError, match="mixes"):
        bc.rewrite_imports("from ansible.module_utils import basic, atomic_files\n", {"atomic_files"}, TARGET)


def test_plain_import_of_an_own_util_is_refused():
    with pytest.raises(bc.BuildError, match="plain 'import"):
        bc.rewrite_imports("import ansible.module_utils.atomic_files\n", {"atomic_files"}, TARGET)


def test_imports_inside_functions_are_rewritten_too():
    source = "def f():\n    from ansible.module_utils import atomic_files\n    return atomic_files\n"
    assert "from %s import atomic_files" % TARGET in bc.rewrite_imports(source, {"atomic_files"}, TARGET)


# --- YAML: modules, roles, playbooks by FQCN -----------------------------------------------------------------

def test_task_module_keys_are_fqcn_and_a_variable_of_the_same_name_is_not():
    out = fq("""\
        ---
        - name: Use it  # a comment stays
          my_mod:
            arg: 1
          vars:
            my_mod: not a module
        - name: Nested
          block:
            - name: In a block
              my_mod: {}
          rescue:
            - name: In rescue
              my_mod:
    """)
    assert out.count("ns.coll.my_mod:") == 3
    assert "    my_mod: not a module" in out
    assert "# a comment stays" in out
    # the module key holds the same arguments, the variable is unchanged
    tasks = yaml.safe_load(out)
    assert tasks[0]["ns.coll.my_mod"] == {"arg": 1} and tasks[0]["vars"] == {"my_mod": "not a module"}


def test_roles_in_plays_and_role_imports_are_fqcn_foreign_roles_are_not():
    out = fq("""\
        - name: Play
          hosts: all
          roles:
            - role: my_role
            - my_role
            - role: geerlingguy.docker
            - other_role
          post_tasks:
            - name: Import
              ansible.builtin.import_role:
                name: my_role
                tasks_from: prune
            - name: Include
              include_role:
                name: my_role
    """, kind="playbook")
    play = yaml.safe_load(out)[0]
    assert play["roles"] == [{"role": "ns.coll.my_role"}, "ns.coll.my_role", {"role": "geerlingguy.docker"},
                             "other_role"]
    assert play["post_tasks"][0]["ansible.builtin.import_role"]["name"] == "ns.coll.my_role"
    assert play["post_tasks"][1]["include_role"]["name"] == "ns.coll.my_role"


def test_import_playbook_of_a_sibling_becomes_its_fqcn():
    out = fq("""\
        - name: Bench
          ansible.builtin.import_playbook: bench.yml
          tags: [benchmark]
        - name: From the top
          import_playbook: playbooks/bench.yml
        - name: Someone else's
          ansible.builtin.import_playbook: other.yml
    """, kind="playbook")
    plays = yaml.safe_load(out)
    assert [p.get("ansible.builtin.import_playbook", p.get("import_playbook")) for p in plays] == [
        "ns.coll.bench", "ns.coll.bench", "other.yml"]


def test_meta_dependencies_are_fqcn():
    out = fq("""\
        galaxy_info:
          role_name: x
        dependencies:
          - role: my_role
          - my_role
    """, kind="meta")
    assert yaml.safe_load(out)["dependencies"] == [{"role": "ns.coll.my_role"}, "ns.coll.my_role"]


def test_a_quoted_name_is_refused_rather_than_missed():
    with pytest.raises(bc.BuildError, match="plain"):
        fq("- name: X\n  \"my_mod\":\n    a: 1\n")


def test_other_yaml_is_left_alone():
    text = "my_mod: 1\n"
    assert bc.fqcn_yaml(text, None, FQCN, ["my_mod"], [], []) == text


@pytest.mark.parametrize("rel, kind", [
    ("roles/r/tasks/main.yml", "tasks"), ("roles/r/handlers/main.yml", "tasks"), ("roles/r/meta/main.yml", "meta"),
    ("roles/r/meta/argument_specs.yml", None), ("roles/r/defaults/main.yml", None),
    ("playbooks/deploy.yml", "playbook"), ("playbooks/tasks/probe.yml", "tasks"), ("roles/r/templates/x.j2", None),
])
def test_yaml_kind_from_the_path(rel, kind):
    assert bc.yaml_kind(rel.replace("/", os.sep)) == kind


MODULE_SOURCE = '''DOCUMENTATION = r"""
module: my_mod
"""

EXAMPLES = r"""
- name: Run it
  my_mod:
    path: /x

- name: Another module and a variable of the same name
  other_mod:
    my_mod: 1
"""
'''


def test_module_examples_name_the_module_by_fqcn_and_the_rest_stays():
    out = bc.fqcn_examples(MODULE_SOURCE, FQCN, ["my_mod"], [], [])
    examples = yaml.safe_load(out.split("EXAMPLES = r\"\"\"", 1)[1].split('"""', 1)[0])
    assert [list(task)[1] for task in examples] == ["ns.coll.my_mod", "other_mod"]
    assert examples[1]["other_mod"] == {"my_mod": 1}
    assert out.split("EXAMPLES")[0] == MODULE_SOURCE.split("EXAMPLES")[0]


def test_module_examples_written_as_plays_have_their_tasks_renamed():
    source = 'EXAMPLES = r"""\n- hosts: all\n  tasks:\n    - my_mod: {a: 1}\n"""\n'
    assert "    - ns.coll.my_mod: {a: 1}" in bc.fqcn_examples(source, FQCN, ["my_mod"], [], [])


def test_module_examples_that_are_not_yaml_are_a_build_error():
    with pytest.raises(bc.BuildError, match="library/my_mod.py: EXAMPLES"):
        bc.fqcn_examples('EXAMPLES = r"""\n- a: [\n"""\n', FQCN, ["my_mod"], [], [], "library/my_mod.py")


def test_filters_are_called_by_fqcn():
    text = "{{ x | url_of }} {{ y|url_of(1) }} {{ z | url_of_other }} {{ w | ns.coll.url_of }} {{ v | default }}"
    assert bc.fqcn_filters(text, FQCN, {"url_of"}) == (
        "{{ x | ns.coll.url_of }} {{ y|ns.coll.url_of(1) }} {{ z | url_of_other }} {{ w | ns.coll.url_of }} "
        "{{ v | default }}")


def test_lookups_are_called_by_fqcn():
    text = "{{ lookup('contract', 'state') }} {{ query(\"contract\") }} {{ q('contract') }} {{ lookup('env', 'X') }}"
    assert bc.fqcn_lookups(text, FQCN, {"contract"}) == (
        "{{ lookup('ns.coll.contract', 'state') }} {{ query(\"ns.coll.contract\") }} {{ q('ns.coll.contract') }} "
        "{{ lookup('env', 'X') }}")


# --- the whole tree from a small checkout --------------------------------------------------------------------

def _write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(textwrap.dedent(text))


@pytest.fixture(name="checkout")
def _checkout(tmp_path):
    root = str(tmp_path / "checkout")
    _write(root, "collection/galaxy.yml", "namespace: ns\nname: coll\nversion: 1.2.3\nlicense_file: LICENSE\n")
    _write(root, "collection/meta/runtime.yml", "requires_ansible: '>=2.17.0'\n")
    _write(root, "collection/CHANGELOG.md", "# Changelog\n")
    _write(root, "collection/README.md", "# The operators' guide\n")
    _write(root, "README.md", "# The maintainers' README\n")
    for name in bc.TOP_FILES:
        _write(root, name, name + "\n")
    _write(root, "library/new_mod.py", "from ansible.module_utils.basic import AnsibleModule\n"
                                       "from ansible.module_utils import helper\n")
    _write(root, "module_utils/helper.py", "from ansible.module_utils.other import x\n")
    _write(root, "module_utils/other.py", "x = 1\n")
    _write(root, "filter_plugins/urls.py", """\
        class FilterModule:
            def filters(self):
                return {"server_url": str}
    """)
    _write(root, "filter_plugins/server_url.yml", "DOCUMENTATION:\n  name: server_url\n")
    _write(root, "roles/new_role/tasks/main.yml", """\
        - name: Run
          new_mod:
            url: "{{ host | server_url }}"
    """)
    _write(root, "roles/new_role/templates/unit.j2", "ExecStart={{ host | server_url }} {{ lookup('paths', 'x') }}\n")
    _write(root, "lookup_plugins/paths.py", "x = 1\n")
    _write(root, "roles/new_role/files/tool.py", "from ansible.module_utils import helper\n")
    _write(root, "playbooks/site.yml", """\
        - name: Site
          hosts: "{{ sglang_hosts | default('blackwell') }}"
          roles:
            - role: new_role
        - name: More
          ansible.builtin.import_playbook: extra.yml
    """)
    _write(root, "playbooks/extra.yml", "- name: Extra\n  hosts: all\n  tasks: []\n")
    for left_out in ("molecule/default/molecule.yml", "tests/unit/test_x.py", "inventories/lab/hosts.yml",
                     "lab/up.sh", ".cache/wheel.whl", "roles/new_role/files/__pycache__/tool.cpython-311.pyc"):
        _write(root, left_out, "x\n")
    return root


def _files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _s, fs in os.walk(root) for f in fs)


def test_build_tree_derives_everything_from_the_checkout(checkout, tmp_path):
    root = bc.build_tree(str(tmp_path / "build"), repo=checkout)
    assert root == str(tmp_path / "build" / "ansible_collections" / "ns" / "coll")
    assert _files(root) == sorted([
        "CHANGELOG.md", "LICENSE", "README.md", "galaxy.yml", "meta/runtime.yml",
        "plugins/modules/new_mod.py", "plugins/module_utils/helper.py", "plugins/module_utils/other.py",
        "plugins/filter/urls.py", "plugins/filter/server_url.yml", "plugins/lookup/paths.py",
        "roles/new_role/tasks/main.yml", "roles/new_role/templates/unit.j2", "roles/new_role/files/tool.py",
        "playbooks/site.yml", "playbooks/extra.yml",
    ])

    def read(rel):
        with open(os.path.join(root, rel), encoding="utf-8") as handle:
            return handle.read()
    target = "ansible_collections.ns.coll.plugins.module_utils"
    assert "from %s import helper" % target in read("plugins/modules/new_mod.py")
    assert "from ansible.module_utils.basic import AnsibleModule" in read("plugins/modules/new_mod.py")
    assert "from %s.other import x" % target in read("plugins/module_utils/helper.py")
    task = yaml.safe_load(read("roles/new_role/tasks/main.yml"))[0]
    assert task == {"name": "Run", "ns.coll.new_mod": {"url": "{{ host | ns.coll.server_url }}"}}
    assert read("roles/new_role/templates/unit.j2") == (
        "ExecStart={{ host | ns.coll.server_url }} {{ lookup('ns.coll.paths', 'x') }}\n")
    site = yaml.safe_load(read("playbooks/site.yml"))
    assert site[0]["roles"] == [{"role": "ns.coll.new_role"}]
    assert site[1]["ansible.builtin.import_playbook"] == "ns.coll.extra"
    # a role's files are shipped as they are (scripts run on hosts, not through Ansible's import machinery)
    assert read("roles/new_role/files/tool.py") == "from ansible.module_utils import helper\n"


def test_the_collections_readme_is_the_operators_guide_not_the_checkouts(checkout, tmp_path):
    """galaxy.yml's readme (the collection's page) is collection/README.md; the checkout's README.md, written for
    its maintainers, is not shipped."""
    root = bc.build_tree(str(tmp_path / "build"), repo=checkout)
    with open(os.path.join(root, "README.md"), encoding="utf-8") as handle:
        assert handle.read() == "# The operators' guide\n"


def test_a_missing_guide_is_a_build_error(checkout, tmp_path):
    os.remove(os.path.join(checkout, "collection", "README.md"))
    with pytest.raises(bc.BuildError, match=r"collection/README.md is missing \(galaxy.yml's readme names it\)"):
        bc.build_tree(str(tmp_path / "build"), repo=checkout)


def test_build_tree_replaces_an_earlier_build(checkout, tmp_path):
    out = str(tmp_path / "build")
    root = bc.build_tree(out, repo=checkout)
    os.rename(os.path.join(checkout, "library", "new_mod.py"), os.path.join(checkout, "library", "renamed.py"))
    bc.build_tree(out, repo=checkout)
    assert os.listdir(os.path.join(root, "plugins", "modules")) == ["renamed.py"]
    with open(os.path.join(root, "roles", "new_role", "tasks", "main.yml"), encoding="utf-8") as handle:
        assert "new_mod:" in handle.read()  # no longer ours: left as it is written


def test_a_doc_file_of_no_filter_is_a_build_error(checkout, tmp_path):
    """A filter's <name>.yml documentation goes beside its plugin; one naming no filter would list a ghost."""
    _write(checkout, "filter_plugins/urls.yml", "DOCUMENTATION:\n  name: urls\n")  # the file, not a filter
    with pytest.raises(bc.BuildError, match="urls.yml documents no filter plugin"):
        bc.build_tree(str(tmp_path / "build"), repo=checkout)


def test_missing_galaxy_metadata_is_a_build_error(checkout, tmp_path):
    _write(checkout, "collection/galaxy.yml", "namespace: ns\nname: coll\n")
    with pytest.raises(bc.BuildError, match="version is missing"):
        bc.build_tree(str(tmp_path / "build"), repo=checkout)


def test_the_real_checkout_builds_and_keeps_every_module_util_role_and_playbook(tmp_path):
    root = bc.build_tree(str(tmp_path / "build"))

    def names(*parts):
        return sorted(os.listdir(os.path.join(*parts)))
    assert names(root, "plugins", "modules") == names(REPO, "library")
    assert names(root, "plugins", "module_utils") == names(REPO, "module_utils")
    assert names(root, "roles") == names(REPO, "roles")
    assert "deploy.yml" in names(root, "playbooks")
    assert names(root, "playbooks") == names(REPO, "playbooks")
    for left_out in ("lab", "molecule", "inventories", ".cache", "library", "module_utils", "scripts"):
        assert not os.path.exists(os.path.join(root, left_out)), left_out
    # the checkout's tests stay out; the collection's tests/ holds only its ansible-test sanity ignores
    assert _files(os.path.join(root, "tests")) == sorted(
        os.path.join("sanity", f) for f in os.listdir(os.path.join(REPO, bc.META_DIR, "tests", "sanity")))
    assert os.path.isfile(os.path.join(root, "CHANGELOG.md"))
    # the alert rules and the dashboard, byte for byte
    assert _files(os.path.join(root, "monitoring")) == _files(os.path.join(REPO, "monitoring"))
    for rel in _files(os.path.join(REPO, "monitoring")):
        with open(os.path.join(root, "monitoring", rel), "rb") as built, \
                open(os.path.join(REPO, "monitoring", rel), "rb") as source:
            assert built.read() == source.read(), rel
    # no short name of a project module is left in a task of the built roles and playbooks
    modules = {n[:-3] for n in names(REPO, "library")}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if bc.yaml_kind(rel) != "tasks":
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as handle:
                tasks = yaml.safe_load(handle) or []
            for task in _walk_tasks(tasks):
                assert not modules & set(task), "%s: %s" % (rel, task.get("name"))
    with open(os.path.join(root, "galaxy.yml"), encoding="utf-8") as handle:
        galaxy = yaml.safe_load(handle)
    assert (galaxy["namespace"], galaxy["name"]) == ("gpufleet", "sglang")
    for key in ("version", "license_file", "readme", "repository"):
        assert galaxy[key]
        if key in ("license_file", "readme"):
            assert os.path.isfile(os.path.join(root, galaxy[key]))


def _walk_tasks(tasks):
    for task in tasks:
        if isinstance(task, dict):
            yield task
            for key in bc.BLOCK_KEYS:
                yield from _walk_tasks(task.get(key) or [])
