"""No role reads another role's variable or result with a fallback.

A role that reads `other_role_result | default(false)` keeps running when the other role renames its result or did
not run: the read silently becomes the fallback (a predicted restart that never happens). A role takes what another
role owns as a declared input (meta/argument_specs.yml); the playbook passes it, and decides any fallback itself
(playbooks are not scanned).

What counts, in every YAML file under roles/<role>/{tasks,defaults,vars,handlers,meta}/:
- the operand of a `default(...)`/`d(...)` filter names another role's variable, i.e. a name that starts with another
  role's folder name and `_` (`fusion_patch_result | default({})`, `(nccl_tuning_result | default({})).env_file`);
- the operand of an `is defined`/`is undefined` test names another role's variable: a guard that skips a task when
  the result is missing plays the same part as a fallback.
What does not count: the role's own variables (its prefix, and role-private `__` names); host facts a module sets
(`nvidia_gpu` from `nvidia_gpu_facts`, which gpu_preflight runs and any play may run itself; `ansible_*`): they are
not a role's result, and the filters that read them (`gpu_identity`, `sglang_default_tp_size`) declare what they do
without them. A fallback value (`x | default(other_role_var)`) is not a read through default.
Jinja is found in `{{ }}`/`{% %}` of any string and in the bare expressions of when, failed_when, changed_when,
until and assert's that.
"""
import os
import warnings

import jinja2
import jinja2.nodes as jn
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROLES = os.path.join(ROOT, "roles")
SCANNED = ("tasks", "defaults", "vars", "handlers", "meta")
BARE_EXPRESSIONS = {"when", "failed_when", "changed_when", "until", "that"}
FALLBACK_FILTERS = {"default", "d"}
GUARD_TESTS = {"defined", "undefined"}

ENV = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])


def role_names():
    return sorted(name for name in os.listdir(ROLES) if os.path.isdir(os.path.join(ROLES, name, "tasks")))


def owner(name, roles):
    """The role whose prefix a variable name has (longest prefix wins), or None."""
    matches = [role for role in roles if name.startswith(role + "_")]
    return max(matches, key=len) if matches else None


def role_files(role):
    for folder in SCANNED:
        top = os.path.join(ROLES, role, folder)
        for directory, _, files in os.walk(top):
            for name in sorted(files):
                if name.endswith((".yml", ".yaml")):
                    yield os.path.join(directory, name)


def scalars(node, key=None):
    """(ScalarNode, the mapping key it is under) for every string of a composed YAML document."""
    if isinstance(node, yaml.ScalarNode):
        yield node, key
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from scalars(item, key)
    elif isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            yield from scalars(value, key_node.value if isinstance(key_node, yaml.ScalarNode) else None)


def templates(scalar, key):
    text = scalar.value
    if not isinstance(text, str):
        return []
    found = []
    if "{{" in text or "{%" in text:
        found.append(text)
    elif key in BARE_EXPRESSIONS and scalar.tag == "tag:yaml.org,2002:str" and text.strip():
        found.append("{{ " + text + " }}")
    return found


def names_in(node):
    return {name.name for name in node.find_all(jn.Name) if name.ctx == "load"} | (
        {node.name} if isinstance(node, jn.Name) else set())


def reads(template):
    """(kind, operand names, source text hint) for every fallback read or definedness guard of a template."""
    with warnings.catch_warnings():
        # Regex escapes in the roles' string literals ('\\s') are not this test's subject.
        warnings.simplefilter("ignore", DeprecationWarning)
        tree = ENV.parse(template)
    for node in tree.find_all((jn.Filter, jn.Test)):
        if isinstance(node, jn.Filter) and node.name in FALLBACK_FILTERS and node.node is not None:
            yield node.name, names_in(node.node)
        elif isinstance(node, jn.Test) and node.name in GUARD_TESTS:
            yield "is " + node.name, names_in(node.node)


def line_of(lines, start, name, kind):
    """The first line from the scalar's start naming the variable next to the filter or test, else naming it."""
    word = kind.split()[-1]
    for wanted in (lambda line: name in line and word in line, lambda line: name in line):
        for number in range(start, len(lines)):
            if wanted(lines[number]):
                return number + 1
    return start + 1


def offenders(role, roles):
    found = []
    for path in role_files(role):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        lines = text.splitlines()
        for document in yaml.compose_all(text, Loader=yaml.SafeLoader):
            if document is None:
                continue
            for scalar, key in scalars(document):
                for template in templates(scalar, key):
                    for kind, names in reads(template):
                        for name in sorted(names):
                            other = owner(name, roles)
                            if other and other != role:
                                line = line_of(lines, scalar.start_mark.line, name, kind)
                                entry = (f"{os.path.relpath(path, ROOT)}:{line}: {name} | {kind} "
                                             f"({other}'s): {lines[line - 1].strip()}")
                                if entry not in found:
                                    found.append(entry)
    return found


def test_role_prefixes_do_not_nest():
    """A name belongs to one role: no role's prefix starts with another's."""
    roles = role_names()
    assert len(roles) >= 10
    assert [(a, b) for a in roles for b in roles if a != b and b.startswith(a + "_")] == []


def test_the_scan_finds_a_cross_role_read():
    roles = ["fusion_patch", "sglang_server"]
    template = "{{ (fusion_patch_result | default({})).x | d(sglang_server_own) if fusion_patch_y is defined }}"
    assert {name for _, names in reads(template) for name in names
            if owner(name, roles) == "fusion_patch"} == {"fusion_patch_result", "fusion_patch_y"}
    assert owner("sglang_server_own", roles) == "sglang_server"
    assert [names for _, names in reads("{{ x | default(fusion_patch_result) }}")] == [{"x"}]


@pytest.mark.parametrize("role", role_names())
def test_no_cross_role_fallback_reads(role):
    found = offenders(role, role_names())
    assert found == [], f"{len(found)} cross-role reads in {role}:\n" + "\n".join(found)
