# -*- coding: utf-8 -*-
"""Paths and account names among a module's parameters that no system call can take.

Pure logic, no I/O. A NUL byte ends a C string, so ``os.stat``, ``open`` and ``pwd.getpwnam`` refuse a str holding
one with ``ValueError: embedded null byte``; a lone surrogate outside the file-system encoding's escape range
(``"\\ud800"``, which JSON can carry) makes them fail with ``UnicodeEncodeError``. Both would reach the user as a
traceback from somewhere inside the module, after it had begun. Each module asks here first, right after Ansible
parsed its arguments, and fails with one message naming every such parameter.
"""
from __future__ import annotations

import os

# Parameters that name an account (resolved with pwd/grp, or passed to runuser) whatever their type.
ACCOUNT_OPTIONS = ("owner", "group", "user", "service_user")


def _show(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _problem(name, value):
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        return "%s holds a NUL byte, which no path or account name can hold (got %s)" % (name, _show(value))
    try:
        os.fsencode(value)
    except UnicodeEncodeError as exc:
        return ("%s holds a lone surrogate (U+%04X), which no path or account name can hold (got %s)"
                % (name, ord(value[exc.start]), _show(value)))
    return None


def _checked(name, spec, extra):
    return (spec.get("type") == "path" or spec.get("elements") == "path" or name in ACCOUNT_OPTIONS
            or name in extra)


def problems(argument_spec, params, extra=(), prefix=""):
    """One message per path or account-name parameter (by ARGUMENT_SPEC: type or elements ``path``, the names in
    ACCOUNT_OPTIONS, the names in EXTRA) whose value, or one of whose list items, a system call cannot take;
    sub-options are followed."""
    found = []
    for name in sorted(argument_spec):
        spec = argument_spec[name] or {}
        value = (params or {}).get(name)
        label = prefix + name
        if value is None:
            continue
        if spec.get("options") and isinstance(value, (list, dict)):
            entries = value if isinstance(value, list) else [value]
            for index, entry in enumerate(entries):
                if isinstance(entry, dict):
                    where = "%s[%d]." % (label, index) if isinstance(value, list) else label + "."
                    found += problems(spec["options"], entry, extra, where)
            continue
        if not _checked(name, spec, extra):
            continue
        if isinstance(value, list):
            found += [problem for problem in (_problem("%s[%d]" % (label, index), item)
                                              for index, item in enumerate(value)) if problem]
        else:
            problem = _problem(label, value)
            if problem:
                found.append(problem)
    return found


def printable(value):
    """VALUE with every string's lone surrogates written as backslash escapes (lists and mappings followed).

    A module's result echoes its arguments (``invocation``), and the controller refuses a result holding a lone
    surrogate ("Refusing to deserialize an invalid UTF8 string value"), which would hide the module's own message:
    a module refusing such an argument passes ``invocation={"module_args": printable(module.params)}``."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, (list, tuple)):
        return [printable(item) for item in value]
    if isinstance(value, dict):
        return {printable(key): printable(item) for key, item in value.items()}
    return value


def refusal(module_name, argument_spec, params, extra=()):
    """The module's failure message for PARAMS, or None when every path and name can be used."""
    found = problems(argument_spec, params, extra)
    return "%s refused its arguments, nothing read or written: %s" % (module_name, "; ".join(found)) if found else None
