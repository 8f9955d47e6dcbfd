# -*- coding: utf-8 -*-
"""Which environment variables the installed SGLang sets for itself at start-up.

SGLang's ``_set_envs_and_config`` (sglang/srt/entrypoints/engine.py) writes some
variables unconditionally (``os.environ[X] = ...``): a value delivered from
Python start-up or a unit's environment is then lost. Read from the source,
never by import.
"""
from __future__ import annotations

import ast

ENGINE = "sglang/srt/entrypoints/engine.py"
FUNCTION = "_set_envs_and_config"


def _environ_key(target):
    """'X' for os.environ['X'] (a Subscript on *.environ with a string key)."""
    if not isinstance(target, ast.Subscript):
        return None
    value = target.value
    if not (isinstance(value, ast.Attribute) and value.attr == "environ"):
        return None
    key = target.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def overrides(source):
    """{NAME: 'always' | 'conditional'} for assignments in _set_envs_and_config; {} if absent."""
    tree = ast.parse(source)
    found = {}
    for func in ast.walk(tree):
        if not (isinstance(func, ast.FunctionDef) and func.name == FUNCTION):
            continue

        def visit(body, conditional):
            for stmt in body:
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        key = _environ_key(target)
                        if key and found.get(key) != "always":
                            found[key] = "conditional" if conditional else "always"
                for field in ("body", "orelse", "handlers", "finalbody"):
                    inner = getattr(stmt, field, None)
                    if isinstance(inner, list) and not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                        nested = conditional or isinstance(stmt, (ast.If, ast.Try, ast.For, ast.While, ast.With))
                        visit([s for s in inner if isinstance(s, ast.stmt)] if field != "handlers" else
                              [s for h in inner for s in h.body], nested)
        visit(func.body, False)
    return found
