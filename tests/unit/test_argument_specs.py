"""Each role's meta/argument_specs.yml `main` entry point declares exactly the variables of its defaults/main.yml,
with the same default wherever the default is a literal (a templated default is documented, not copied)."""
import os

import pytest
import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ROLES = os.path.join(ROOT, "roles")


def role_names():
    return sorted(name for name in os.listdir(ROLES) if os.path.isfile(os.path.join(ROLES, name, "defaults", "main.yml")))


def load(role, *path):
    with open(os.path.join(ROLES, role, *path), encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def templated(value):
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, list):
        return any(templated(item) for item in value)
    if isinstance(value, dict):
        return any(templated(item) for item in value.values())
    return False


def test_every_role_with_defaults_has_a_spec():
    names = role_names()
    assert len(names) >= 8
    for role in names:
        assert os.path.isfile(os.path.join(ROLES, role, "meta", "argument_specs.yml")), role


@pytest.mark.parametrize("role", role_names())
def test_spec_names_equal_defaults(role):
    defaults = load(role, "defaults", "main.yml")
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"].get("options") or {}
    assert sorted(set(defaults) - set(options)) == [], "in defaults/main.yml, not in the spec"
    # Required inputs have no default; every other option is a default.
    optional = {name for name, spec in options.items() if not spec.get("required")}
    assert sorted(optional - set(defaults)) == [], "in the spec, not in defaults/main.yml"


@pytest.mark.parametrize("role", role_names())
def test_literal_defaults_are_the_spec_defaults(role):
    defaults = load(role, "defaults", "main.yml")
    options = load(role, "meta", "argument_specs.yml")["argument_specs"]["main"].get("options") or {}
    wrong = {}
    for name, value in defaults.items():
        spec = options.get(name) or {}
        if templated(value):
            # A copy of what the template gives today would be a second, silently diverging truth.
            if "default" in spec and spec["default"] != value:
                wrong[name] = ("templated in defaults, literal in the spec", value, spec["default"])
            continue
        if spec.get("default") != value:
            wrong[name] = (value, spec.get("default", "<no default>"))
    assert wrong == {}


@pytest.mark.parametrize("role", role_names())
def test_entry_points_declare_only_known_variables(role):
    """Every option of every entry point is a default of the role, an option of main, or an input that entry
    point requires (sglang_drift's role_failed: the role that failed)."""
    defaults = load(role, "defaults", "main.yml")
    specs = load(role, "meta", "argument_specs.yml")["argument_specs"]
    main = specs["main"].get("options") or {}
    for entry, spec in specs.items():
        for name, option in (spec.get("options") or {}).items():
            assert name in defaults or name in main or option.get("required"), (entry, name)
            if name in defaults and not templated(defaults[name]) and "default" in option:
                assert option["default"] == defaults[name], (entry, name)
