"""Each role's README: present, and its variables table equal to what meta/argument_specs.yml says."""
import os

import pytest
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
rr = load_file("scripts/role_readmes.py", "role_readmes")

ROLES = rr.roles()


def test_every_role_has_argument_specs_and_is_checked_here():
    on_disk = sorted(d for d in os.listdir(os.path.join(REPO, "roles"))
                     if os.path.isdir(os.path.join(REPO, "roles", d)))  # sglang_layout has defaults only
    assert [name for name, _dir in ROLES] == on_disk


@pytest.mark.parametrize("role, role_dir", ROLES, ids=[name for name, _dir in ROLES])
def test_readme_variables_match_the_argument_specs(role, role_dir):
    path = os.path.join(role_dir, "README.md")
    assert os.path.exists(path), "%s has no README.md: run scripts/role_readmes.py" % role
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    block = rr.render_block(role, rr.load_specs(role_dir))
    assert rr.updated(text, block) == text, "%s: README's variables are stale: run scripts/role_readmes.py" % role
    for section in ("## Variables", "## Example"):
        assert section in text, "%s: README lacks %s" % (role, section)
    assert "%s.%s" % (rr.COLLECTION, role) in text  # the example names the role by FQCN


SPECS = {
    "main": {
        "short_description": "Do <one> thing.",
        "options": {
            "r_b": {"type": "list", "elements": "str", "default": ["x", "y"], "description": ["Two", "lines."]},
            "r_a": {"type": "str", "required": True, "choices": ["on", "off"], "description": "A | B."},
            "r_c": {"type": "path", "default": "{{ inventory_dir | default(playbook_dir, true) }}/x"},
            "r_d": {"type": "str", "default": ""},
        },
    },
    "prune": {"short_description": "Prune.", "options": {}},
}


def test_block_lists_each_entry_point_main_first_with_its_options_sorted():
    block = rr.render_block("r", SPECS)
    lines = block.splitlines()
    assert lines[0] == rr.BEGIN and lines[-1] == rr.END
    assert block.index("### Entry point `main`") < block.index("### Entry point `prune` (`tasks_from: prune`)")
    rows = [line for line in lines if line.startswith("| `")]
    assert rows == [
        "| `r_a` | str (on, off) |  | yes | A \\| B. |",
        "| `r_b` | list of str | `[x, y]` |  | Two lines. |",
        "| `r_c` | path | `{{ inventory_dir \\| default(playbook_dir, true) }}/x` |  |  |",
        "| `r_d` | str | `\"\"` |  |  |",
    ]
    assert "Do &lt;one&gt; thing." in block
    assert "No variables." in block


def test_updated_replaces_only_the_block_and_refuses_a_readme_without_one():
    text = "# Title\n\nprose\n\n%s\nold table\n%s\n\n## Example\nkept\n" % (rr.BEGIN, rr.END)
    out = rr.updated(text, rr.render_block("r", SPECS))
    assert out.startswith("# Title\n\nprose\n\n") and out.endswith("\n\n## Example\nkept\n")
    assert "old table" not in out and "`r_a`" in out
    with pytest.raises(ValueError):
        rr.updated("# no block\n", "x")


def test_a_changed_spec_makes_the_readme_stale():
    readme = rr.first_readme("r", SPECS)
    assert rr.updated(readme, rr.render_block("r", SPECS)) == readme
    changed = {"main": dict(SPECS["main"], options=dict(SPECS["main"]["options"], r_e={"type": "int"})),
               "prune": SPECS["prune"]}
    assert rr.updated(readme, rr.render_block("r", changed)) != readme


def test_first_readme_names_required_variables_in_its_example():
    readme = rr.first_readme("r", SPECS)
    assert "    - role: gpufleet.sglang.r\n      vars:\n        r_a: ...  # required" in readme


def test_an_option_described_as_in_main_is_named_once_and_a_different_one_gets_its_row():
    main = SPECS["main"]["options"]
    specs = {"main": SPECS["main"],
             "all": {"options": dict(main)},
             "some": {"options": {"r_a": main["r_a"], "r_c": dict(main["r_c"], description="Said otherwise.")}}}
    block = rr.render_block("r", specs)
    every, some = block.split("### Entry point `some`")
    assert every.split("### Entry point `all`")[1].count("| `r_") == 0
    assert "Every variable of `main`, as described there." in every
    assert "As in `main`: `r_a`." in some
    assert [line for line in some.splitlines() if line.startswith("| `")] == [
        "| `r_c` | path | `{{ inventory_dir \\| default(playbook_dir, true) }}/x` |  | Said otherwise. |"]
