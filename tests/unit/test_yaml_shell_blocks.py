"""Shell commands written as folded YAML blocks (`>`/`>-`) must fold into one line.

A folded block keeps the newline before every more-indented line, so an indented `then` branch becomes a new
shell line: `a &&\n  b` runs `b` alone, a quoted argument on its own line becomes a command. Such a block once
hid in molecule/drift/create.yml behind a download cache and only broke on a clean clone. Multi-line shell goes
in a literal block (`|`), where every line is meant as a line.
"""
import os
import re
import subprocess

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import FoldedScalarString

from tests.helpers.ansible_run import REPO

SHELL_MODULES = {"ansible.builtin.shell", "ansible.builtin.command", "ansible.builtin.script",
                 "shell", "command", "script"}


def tracked_yaml_files():
    out = subprocess.check_output(["git", "ls-files", "*.yml", "*.yaml"], cwd=REPO, text=True)
    return [path for path in out.split() if os.path.isfile(os.path.join(REPO, path))]


def shell_texts(node, under_shell=False):
    """Yield (line, text) of every folded string given to a shell/command/script module (free form or cmd)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SHELL_MODULES:
                if isinstance(value, FoldedScalarString):
                    yield node.lc.value(key)[0] + 1, str(value)
                yield from shell_texts(value, under_shell=True)
            elif under_shell and key == "cmd" and isinstance(value, FoldedScalarString):
                yield node.lc.value(key)[0] + 1, str(value)
            else:
                yield from shell_texts(value)
    elif isinstance(node, list):
        for item in node:
            yield from shell_texts(item)


def folded_with_newlines(text):
    """A newline outside Jinja expressions and statements (inside them it is only template whitespace)."""
    return "\n" in re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "", text, flags=re.DOTALL).rstrip("\n")


def load(text):
    return YAML().load(text)


def test_the_check_finds_a_folded_block_that_keeps_a_newline():
    broken = load("- ansible.builtin.shell:\n    cmd: >-\n      if true; then\n        echo a; fi &&\n      echo b\n")
    good = load("- ansible.builtin.shell:\n    cmd: >-\n      mkdir -p x &&\n      echo {{ [1]\n         | first }}\n")
    assert [folded_with_newlines(text) for _, text in shell_texts(broken)] == [True]
    assert [folded_with_newlines(text) for _, text in shell_texts(good)] == [False]


@pytest.mark.parametrize("path", tracked_yaml_files())
def test_folded_shell_commands_are_one_line(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        documents = list(YAML().load_all(handle))
    broken = [line for doc in documents for line, text in shell_texts(doc) if folded_with_newlines(text)]
    assert not broken, "%s: folded shell command(s) keep newlines at line(s) %s: use a literal block (|)" % (
        path, broken)
