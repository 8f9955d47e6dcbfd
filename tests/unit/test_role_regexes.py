"""Every regular expression the roles and playbooks write as a Jinja string literal compiles without a warning.

Python warns (FutureWarning "Possible nested set") for a class that begins with '[' ('[[]' was one in
sglang_install's vars): Ansible prints the warning on every run that templates it, a user's first deploy included.
The literals are found with Jinja's own lexer (the string as the filter or test receives it) as the pattern of the
match/search/regex tests and the regex_* filters, called directly or by name through select/reject/map."""
import glob
import os
import re
import warnings

import pytest
import yaml
from jinja2 import Environment
from jinja2.exceptions import TemplateSyntaxError

from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REGEX_PLUGINS = {"match", "search", "regex", "regex_replace", "regex_search", "regex_findall",
                 "ansible.builtin.regex_replace", "ansible.builtin.regex_search", "ansible.builtin.regex_findall"}
# Keys whose value is a bare Jinja expression (no braces).
CONDITIONS = {"when", "that", "changed_when", "failed_when", "until"}
LEXER = Environment().lexer


def yaml_files():
    found = []
    for pattern in ("roles/*/vars/*.yml", "roles/*/defaults/*.yml", "roles/*/tasks/*.yml", "roles/*/handlers/*.yml",
                    "playbooks/*.yml", "playbooks/tasks/*.yml", "deploy.yml"):
        found += glob.glob(os.path.join(REPO, pattern))
    return sorted(found)


def templates(node, key=None):
    """Every templated string below NODE, a condition wrapped as an expression."""
    if isinstance(node, dict):
        for name, value in node.items():
            yield from templates(value, name)
    elif isinstance(node, list):
        for value in node:
            yield from templates(value, key)
    elif isinstance(node, str):
        if key in CONDITIONS and "{{" not in node:
            yield "{{ %s }}" % node
        elif "{{" in node or "{%" in node:
            yield node


def literal(raw, in_expression):
    """A string token's value as Ansible's templar hands it on: inside {{ }} backslashes are kept as written (its
    lexer escapes them: YAML already had its turn), in {% %} Jinja's own escapes apply."""
    body = raw[1:-1]
    if in_expression:
        return body
    return body.encode("ascii", "backslashreplace").decode("unicode-escape")


def patterns(source):
    """The regex literals in one template: a string right after a regex plugin's name and '(' or, for select/
    reject/map, after the plugin's name as a string and ','."""
    tokens, in_expression = [], False
    try:
        for _line, kind, value in LEXER.tokeniter(source, None):
            if kind in ("variable_begin", "variable_end"):
                in_expression = kind == "variable_begin"
            elif kind == "string":
                tokens.append(("string", literal(value, in_expression)))
            elif kind in ("name", "operator"):
                tokens.append((kind, value))
    except TemplateSyntaxError:
        return []
    found = []
    for first, second, third in zip(tokens, tokens[1:], tokens[2:]):
        if first[1] not in REGEX_PLUGINS or third[0] != "string":
            continue
        if (first[0] == "name" and second == ("operator", "(")) or (first[0] == "string" and second == ("operator", ",")):
            found.append(third[1])
    return found


def all_patterns():
    found = []
    for path in yaml_files():
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
        for source in templates(data):
            found += [(os.path.relpath(path, REPO), pattern) for pattern in patterns(source)]
    return found


def test_the_scan_finds_the_install_roles_pin_patterns_as_the_filters_receive_them():
    found = [pattern for path, pattern in all_patterns() if path == "roles/sglang_install/vars/main.yml"]
    assert "^[A-Za-z0-9][A-Za-z0-9._-]*(\\[[^\\]]*\\])?==" in found
    assert len([pattern for pattern in found if "==" in pattern]) == 2
    assert patterns("{{ x is match('[[]') }}") == ["[[]"]
    assert patterns("{{ x | select('search', 'a', 'b') }}") == ["a"]
    assert patterns("{{ x is match('\\s') }}{% if x is search('\\t') %}{% endif %}") == ["\\s", "\t"]


@pytest.mark.parametrize("where,pattern", all_patterns())
def test_every_regex_literal_compiles_without_a_warning(where, pattern):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        re.compile(pattern)


def test_the_wheelhouse_pins_come_out_of_a_lock_without_a_warning():
    init_plugin_loader()
    with open(os.path.join(REPO, "roles", "sglang_install", "vars", "main.yml"), encoding="utf-8") as handle:
        expression = yaml.safe_load(handle)["__sglang_install_pins"]
    lock = ("# generated\nsglang[all]==0.5.17 ; python_version >= '3.10' \\\n    --hash=sha256:abc\n"
            "flashinfer-python==0.2.1\ntorch==2.8.0+cu128\n  --hash=sha256:def\n-e ./local\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pins = Templar(loader=DataLoader(), variables={"__sglang_install_lock_text": lock}).template(
            trust_as_template(expression))
    assert pins == ["sglang==0.5.17", "flashinfer-python==0.2.1", "torch==2.8.0+cu128"]
