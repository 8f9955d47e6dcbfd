# -*- coding: utf-8 -*-
"""Every command-line flag of an installed SGLang, read from its source, never imported.

Importing ``sglang.srt.server_args`` pulls in torch; the controller, CI and check-mode
runs have none. The flags are all declared statically, in two styles that this reads
with ``ast`` the way SGLang itself turns them into argparse options:

* ``parser.add_argument("--flag", "--alias", action=..., choices=..., nargs=...)``
  inside ``ServerArgs.add_cli_args`` (every flag up to 0.5.9; dynamic-choice and
  deprecated flags after that);
* from 0.5.14, annotated fields, ``name: A[T, "help"]`` or ``A[T, Arg(...)]``, which
  ``add_cli_args_from_dataclass`` (``sglang/srt/arg_groups/arg_utils.py``) turns into
  ``--name-with-dashes`` plus ``Arg.aliases``; ``Arg.cli_name`` renames the flag,
  ``Arg(no_cli=True)`` hides it. The fields live on ``ServerArgs`` (0.5.14-0.5.19) or,
  from 0.5.21, on the namespace classes in ``arg_groups/fields/*.py`` that
  ``collect_input_fields(...)`` merges into it.

Choices are read where they are literal or a module-level constant (followed through
imports); choices computed at start-up (parser registries, enums, environment) are left
unchecked rather than guessed.
"""
from __future__ import annotations

import ast
import difflib
import os
import re

from ansible.module_utils import pkg_versions as pv

SERVER_ARGS = "sglang/srt/server_args.py"

# argparse actions that store a constant and take no value, and what they store.
_NO_VALUE_ACTIONS = {"store_true": True, "store_false": False, "store_const": None, "append_const": None,
                     "count": 1, "help": None, "version": None}
_MUTATORS = ("add", "append", "extend", "insert", "update")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's own test: such a token is a value


class SourceError(Exception):
    """sglang is missing, or its argument definitions are in a layout this does not understand."""


class FlagTable(dict):
    """flag -> entry; also where it was read: ``version`` and ``sources`` (paths under site-packages).

    An entry: ``dest``, ``takes_value``, ``nargs`` (argparse's, when it takes a value), ``type``
    ("int", "float", "str" or None for a custom parser), ``choices`` (list or None: not
    checked), ``required``, ``deprecated``, ``refuses`` (the message when this SGLang stops
    the launch on this flag, else None), ``const`` (stored when given without a value),
    ``source`` (the file that declares it).
    """

    version = None
    sources = ()


class _Unknown(Exception):
    """A value that is not known without running the code."""


class _Module(object):
    """One parsed source file: its top-level assignments, imports and classes."""

    def __init__(self, site_packages, rel):
        self.rel = rel
        with open(os.path.join(site_packages, rel), "rb") as handle:
            self.tree = ast.parse(handle.read(), filename=rel)
        self.package = rel.split("/")[:-1]  # for relative imports
        self.assigns, self.imports, self.classes = {}, {}, {}
        # Names changed at import time (`if envs.X.get(): CHOICES.add(...)`, `X += [...]`, assigned
        # under an `if`): their value depends on the environment, so they count as unknown.
        self.mutated = set()
        for node, conditional in _module_level(self.tree.body):
            if isinstance(node, ast.AugAssign) or (conditional and isinstance(node, (ast.Assign, ast.AnnAssign))):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                self.mutated.update(target.id for target in targets if isinstance(target, ast.Name))
            call = node.value if isinstance(node, ast.Expr) else None
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                    isinstance(call.func.value, ast.Name) and call.func.attr in _MUTATORS:
                self.mutated.add(call.func.value.id)
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigns[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigns[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom):
                base = self.package[:len(self.package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (module, alias.name)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node


def _module_level(statements, conditional=False):
    """(statement, runs conditionally) for module-level code, into if/try/with/for bodies, not into defs."""
    for node in statements:
        yield node, conditional
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.ExceptHandler)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _module_level(getattr(node, field, []), True)


class _Reader(object):
    """Parses files of one site-packages on demand and resolves names across their imports."""

    def __init__(self, site_packages):
        self.site_packages = site_packages
        self.modules = {}

    def module(self, rel):
        if rel not in self.modules:
            self.modules[rel] = _Module(self.site_packages, rel) if os.path.isfile(
                os.path.join(self.site_packages, rel)) else None
        return self.modules[rel]

    def imported(self, mod, name):
        """(module, original name) that ``name`` is imported from in ``mod``, or (None, None)."""
        if name not in mod.imports:
            return None, None
        dotted, original = mod.imports[name]
        path = dotted.replace(".", "/")
        return self.module(path + ".py") or self.module(path + "/__init__.py"), original

    def constant(self, node, mod, depth=0):
        """The value of a constant expression: literals, +, list()/set()/sorted(), module-level names."""
        if depth > 20:
            raise _Unknown()
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            value = []
            for elt in node.elts:  # [*OTHER, "x"] too
                if isinstance(elt, ast.Starred):
                    value.extend(self.constant(elt.value, mod, depth + 1))
                else:
                    value.append(self.constant(elt, mod, depth + 1))
            return value
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.constant(node.left, mod, depth + 1), self.constant(node.right, mod, depth + 1)
            if type(left) is not type(right):
                raise _Unknown()
            return left + right
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.constant(node.operand, mod, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1 and \
                node.func.id in ("list", "tuple", "set", "frozenset", "sorted") and not node.keywords:
            value = list(self.constant(node.args[0], mod, depth + 1))
            return sorted(value) if node.func.id == "sorted" else value
        if isinstance(node, ast.Name) and node.id not in mod.mutated:
            if node.id in mod.assigns:
                return self.constant(mod.assigns[node.id], mod, depth + 1)
            other, original = self.imported(mod, node.id)
            if other is not None:
                return self.constant(ast.Name(id=original), other, depth + 1)
        raise _Unknown()

    def constant_or(self, node, mod, default=None):
        try:
            return self.constant(node, mod)
        except _Unknown:
            return default

    def find_class(self, node, mod, depth=0):
        """(ClassDef, its module) that a name refers to, following imports; (None, None) if not in reach."""
        if isinstance(node, ast.Name) and depth < 10:
            if node.id in mod.classes:
                return mod.classes[node.id], mod
            other, original = self.imported(mod, node.id)
            if other is not None:
                return self.find_class(ast.Name(id=original), other, depth + 1)
        return None, None


def _help_text(node):
    """Constant parts of a help string (enough to see the word 'deprecated')."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value for part in node.values if isinstance(part, ast.Constant))
    if isinstance(node, ast.BinOp):
        return _help_text(node.left) + _help_text(node.right)
    return ""


def _says_deprecated(help_text):
    return help_text.lower().lstrip("([ ").startswith("deprecated")


def _type_name(node):
    name = node.id if isinstance(node, ast.Name) else None
    return name if name in ("int", "float", "str") else None


def _entry(dest, source, takes_value=True, nargs=None, type_=None, choices=None, required=False,
           deprecated=False, refuses=None, const=None):
    return {"dest": dest, "takes_value": takes_value, "nargs": nargs if takes_value else 0, "type": type_,
            "choices": choices, "required": required, "deprecated": deprecated, "refuses": refuses,
            "const": const, "source": source}


# --- parser.add_argument(...) -------------------------------------------------------------------

def _custom_action(reader, mod, action, keywords):
    """(nargs, refuses) of an argparse.Action subclass, from its __init__ default and __call__ body.

    The Deprecated*Action classes default ``nargs=0`` (no value). ``DeprecatedAction`` raises
    in 0.5.4-0.5.7 (the launch stops), only warns in 0.5.9-0.5.14, and stops from 0.5.19
    when the registration passes ``error_message=``.
    """
    cls, cls_mod = reader.find_class(action, mod)
    nargs, refuses = None, None
    if cls is None:
        return nargs, refuses
    for item in cls.body:
        if not isinstance(item, ast.FunctionDef):
            continue
        if item.name == "__init__":
            args = item.args.args + item.args.kwonlyargs
            defaults = [None] * (len(item.args.args) - len(item.args.defaults)) + item.args.defaults + \
                item.args.kw_defaults
            for arg, default in zip(args, defaults):
                if arg.arg == "nargs" and default is not None:
                    nargs = reader.constant_or(default, cls_mod)
        elif item.name == "__call__":
            for stmt in item.body:
                if _stops(stmt):
                    refuses = _help_text(keywords.get("help")) or "refused by this SGLang"
                elif isinstance(stmt, ast.If) and any(_stops(s) for s in stmt.body):
                    # e.g. `if self.error_message is not None: parser.error(...)`: stops when set
                    named = {n.attr for n in ast.walk(stmt.test) if isinstance(n, ast.Attribute)}
                    for name in named & set(keywords):
                        if reader.constant_or(keywords[name], mod) is not None:
                            refuses = reader.constant_or(keywords[name], mod, "refused by this SGLang")
    return nargs, refuses


def _stops(stmt):
    """``raise ...`` or ``parser.error(...)``: argparse stops the launch."""
    func = stmt.value.func if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
    return isinstance(stmt, ast.Raise) or (isinstance(func, ast.Attribute) and func.attr == "error" and
                                           isinstance(func.value, ast.Name) and func.value.id == "parser")


def _add_argument(reader, mod, call, table):
    names = [reader.constant_or(arg, mod) for arg in call.args]
    names = [name for name in names if isinstance(name, str) and name.startswith("-")]
    if not names:
        return
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    longs = [name for name in names if name.startswith("--")]
    dest = reader.constant_or(kw["dest"], mod) if "dest" in kw else \
        (longs or names)[0].lstrip("-").replace("-", "_")  # argparse's rule
    help_text = _help_text(kw.get("help"))
    entry = _entry(dest, mod.rel, type_=_type_name(kw["type"]) if "type" in kw else "str",
                   choices=reader.constant_or(kw["choices"], mod) if "choices" in kw else None,
                   required=reader.constant_or(kw["required"], mod) is True if "required" in kw else False,
                   deprecated=_says_deprecated(help_text), const=reader.constant_or(kw.get("const"), mod))
    if "nargs" in kw:
        entry["nargs"] = reader.constant_or(kw["nargs"], mod)
    action = kw.get("action")
    negated = []
    if isinstance(action, ast.Constant) and action.value in _NO_VALUE_ACTIONS:
        entry.update(takes_value=False, nargs=0, type=None)
        if _NO_VALUE_ACTIONS[action.value] is not None:
            entry["const"] = _NO_VALUE_ACTIONS[action.value]
    elif isinstance(action, ast.Attribute) and action.attr == "BooleanOptionalAction":
        entry.update(takes_value=False, nargs=0, type=None, const=True)
        negated = ["--no-" + name[2:] for name in longs]
    elif isinstance(action, ast.Name):
        nargs, entry["refuses"] = _custom_action(reader, mod, action, kw)
        if "nargs" not in kw:
            entry["nargs"] = nargs
        entry["deprecated"] = entry["deprecated"] or action.id.startswith("Deprecated")
        if entry["nargs"] == 0:
            entry.update(takes_value=False, type=None)
            entry["const"] = reader.constant_or(kw.get("const_value", kw.get("const")), mod, True)
    for name in names:
        table.setdefault(name, entry)
    for name in negated:
        table.setdefault(name, dict(entry, const=False))


# --- annotated fields (0.5.14+), mirroring arg_utils.add_cli_args_from_dataclass ----------------

def _subscript(node):
    """(name of the subscripted type, its arguments) for X[...]; (name, []) for a bare name."""
    if isinstance(node, ast.Subscript):
        base = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", None)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return base, args
    if isinstance(node, ast.Name):
        return node.id, []
    if isinstance(node, ast.Attribute):
        return node.attr, []
    return None, []


def _unwrap_optional(node):
    """Optional[X], Union[X, None], X | None -> X (only when exactly one non-None member)."""
    base, args = _subscript(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        args, base = [node.left, node.right], "Union"
    if base in ("Optional", "Union"):
        members = [arg for arg in args if not (isinstance(arg, ast.Constant) and arg.value is None)]
        if len(members) == 1:
            return members[0]
    return node


def _field_meta(annotation):
    """The Arg(...) keywords of an A[T, ...] field: the first Arg or help string wins; None: no CLI."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body  # a quoted annotation
    base, args = _subscript(annotation)
    if base not in ("A", "Annotated") or len(args) < 2:
        return None, None
    for meta in args[1:]:
        if isinstance(meta, ast.Call) and getattr(meta.func, "id", None) == "Arg":
            return args[0], {k.arg: k.value for k in meta.keywords if k.arg}
        if _help_text(meta) or (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
            return args[0], {"help": meta}
    return None, None  # NS(...) / Derived(...) only: not a CLI input


def _has_default(stmt):
    value = stmt.value
    if value is None:
        return False
    if isinstance(value, ast.Call) and getattr(value.func, "attr", getattr(value.func, "id", None)) == "field":
        return any(k.arg in ("default", "default_factory") for k in value.keywords)
    return True


def _field(reader, mod, stmt, table):
    raw, meta = _field_meta(stmt.annotation)
    if meta is None or reader.constant_or(meta.get("no_cli"), mod) is True:
        return
    name = stmt.target.id
    cli_name = reader.constant_or(meta.get("cli_name"), mod) or "--" + name.replace("_", "-")
    names = [cli_name] + list(reader.constant_or(meta.get("aliases"), mod) or [])
    # Arg(choices=...) computed at start-up (e.g. Backend.ALL): unchecked rather than guessed
    meta_choices = reader.constant_or(meta["choices"], mod, _Unknown) if "choices" in meta else None
    unchecked = meta_choices is _Unknown
    meta_nargs = reader.constant_or(meta.get("nargs"), mod)
    has_parser = "type_parser" in meta and reader.constant_or(meta["type_parser"], mod, "x") is not None
    entry = _entry(name, mod.rel, deprecated=_says_deprecated(_help_text(meta.get("help"))),
                   const=reader.constant_or(meta.get("const"), mod))
    inner = _unwrap_optional(raw)
    base, args = _subscript(inner)
    negated = []
    if "action" in meta:
        action = meta["action"]
        extra = meta.get("action_kwargs")
        extra = {k.value: v for k, v in zip(extra.keys, extra.values) if isinstance(k, ast.Constant)} \
            if isinstance(extra, ast.Dict) else {}
        entry["type"] = _type_name(extra["type"]) if "type" in extra else None
        if isinstance(action, ast.Attribute) and action.attr == "BooleanOptionalAction":
            entry.update(takes_value=False, nargs=0, const=True)
            negated = ["--no-" + flag[2:] for flag in names if flag.startswith("--")]
        else:
            entry["nargs"], entry["refuses"] = _custom_action(reader, mod, action, extra)
            if "nargs" in extra:
                entry["nargs"] = reader.constant_or(extra["nargs"], mod)
            entry["takes_value"] = entry["nargs"] != 0
    elif base == "Literal":
        literals = [reader.constant_or(arg, mod) for arg in args]
        entry["choices"] = None if unchecked else (meta_choices or literals)
        first = type(literals[0]).__name__ if literals else "str"
        entry["type"] = None if has_parser else (first if first in ("int", "float") else "str")
    elif base in ("List", "list") and (args or base == "List") and not has_parser:
        entry["nargs"] = meta_nargs or "+"
        entry["type"] = (_type_name(args[0]) or "str") if args else "str"
        entry["choices"] = None if unchecked else (meta_choices or None)
    elif base == "bool":
        entry.update(takes_value=False, nargs=0, const=True)
    else:
        entry["type"] = None if has_parser else (_type_name(inner) or "str")
        entry["choices"] = None if unchecked else (meta_choices or None)
        entry["nargs"] = meta_nargs
        required = reader.constant_or(meta.get("required"), mod)
        entry["required"] = required is True or (required is None and not _has_default(stmt))
    for flag in names:
        table.setdefault(flag, entry)
    for flag in negated:
        table.setdefault(flag, dict(entry, const=False))


def _class_fields(mod, cls):
    """Annotated field statements of a class, with the module each one is declared in."""
    return [(mod, stmt) for stmt in cls.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)]


def _record_fields(reader, mod, cls):
    """ServerArgs' fields: from 0.5.21 the namespace classes handed to collect_input_fields come
    first, then the class's own (``{**_annotations, **ServerArgs.__annotations__}``)."""
    fields = []
    for node in mod.tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "collect_input_fields" and value.args:
            sources = value.args[0]
            if isinstance(sources, ast.Name):
                sources = mod.assigns.get(sources.id)
            for elt in getattr(sources, "elts", []):
                ns_cls, ns_mod = reader.find_class(elt, mod)
                if ns_cls is None:
                    raise SourceError("%s: namespace class %s not found in sglang's sources" % (
                        mod.rel, ast.unparse(elt)))
                fields += _class_fields(ns_mod, ns_cls)
    merged = {}  # like the dict merge: a later declaration of a name replaces the earlier, in its place
    for field_mod, stmt in fields + _class_fields(mod, cls):
        merged[stmt.target.id] = (field_mod, stmt)
    return list(merged.values())


def sglang_version(site_packages):
    """Version from sglang's dist-info, else sglang/_version.py (0.5.14+) or version.py; None if none says."""
    version = pv.find_distribution(pv.installed_versions(site_packages), "sglang")
    for name in ("_version.py", "version.py"):
        path = os.path.join(site_packages, "sglang", name)
        if version is None and os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                match = re.search(r"^__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)", handle.read(), re.M)
            version = match.group(1) if match else None
    return version


def known_flags(site_packages):
    """Every flag ``python -m sglang.launch_server`` accepts, as a FlagTable (see there)."""
    reader = _Reader(site_packages)
    mod = reader.module(SERVER_ARGS)
    if mod is None:
        raise SourceError("no %s under %s: sglang is not installed there" % (SERVER_ARGS, site_packages))
    cls = mod.classes.get("ServerArgs")
    add_cli_args = [item for item in (cls.body if cls else [])
                    if isinstance(item, ast.FunctionDef) and item.name == "add_cli_args"]
    if not add_cli_args:
        raise SourceError("%s: no ServerArgs.add_cli_args, this layout is not understood" % SERVER_ARGS)
    table = FlagTable()
    calls = [node for node in ast.walk(add_cli_args[0]) if isinstance(node, ast.Call)]
    for call in sorted(calls, key=lambda node: (node.lineno, node.col_offset)):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "add_argument":
            _add_argument(reader, mod, call, table)
        elif getattr(func, "id", None) == "add_cli_args_from_dataclass" and len(call.args) >= 2:
            record, record_mod = reader.find_class(call.args[1], mod)
            if record is None:
                raise SourceError("%s: add_cli_args_from_dataclass(%s) names no class in reach" % (
                    SERVER_ARGS, ast.unparse(call.args[1])))
            for field_mod, stmt in _record_fields(reader, record_mod, record):
                _field(reader, field_mod, stmt, table)
    if "--model-path" not in table:
        raise SourceError("read %d flags from %s but not --model-path: this layout is not understood" % (
            len(table), SERVER_ARGS))
    table.version = sglang_version(site_packages)
    table.sources = sorted(rel for rel, module in reader.modules.items()
                           if module is not None and any(entry["source"] == rel for entry in table.values()))
    return table


# --- checking a command line ------------------------------------------------------------------

def _where(flags, entry=None):
    version = "sglang %s" % (getattr(flags, "version", None) or "(version unknown)")
    if entry is not None:
        return "%s, %s" % (version, entry["source"])
    by_dir = {}
    for rel in getattr(flags, "sources", ()) or ():
        by_dir.setdefault(os.path.dirname(rel), []).append(rel)
    parts = [files[0] if len(files) == 1 else "%s/*.py (%d files)" % (folder, len(files))
             for folder, files in sorted(by_dir.items())]
    return "%s, looked up in %s" % (version, ", ".join(parts) or "its argument definitions")


def _convert(value, type_):
    return int(value) if type_ == "int" else float(value) if type_ == "float" else value


def _in_choices(value, choices, type_):
    if value in choices:
        return True
    return type_ is None and str(value) in [str(choice) for choice in choices]  # custom parser: compare text


def _flag_token(token, flags):
    """(flag, explicit value or None) if argparse would read ``token`` as an option, else None."""
    if not token.startswith("-") or token in ("-", "--"):
        return None
    if token in flags:
        return token, None
    name, equals, value = token.partition("=")
    if equals and name in flags:
        return name, value
    if _NEGATIVE_NUMBER.match(token) or " " in token:
        return None
    return name, (value if equals else None)


def check_argv(flags, argv, allow_abbrev=False, notes=None):
    """Check ``argv`` (what follows ``-m sglang.launch_server``) against ``flags``.

    Returns (errors, parsed): parsed maps dest -> value (int/float converted, lists for
    nargs). argparse also accepts any unambiguous prefix of a flag (``--tp`` for
    ``--tp-size``); by default such an abbreviation is an error here, because it is one
    flag away from ambiguity in the next release; ``allow_abbrev=True`` accepts it as
    argparse does. Deprecated flags used are described in ``notes`` (a list) if given.
    """
    errors, parsed, seen = [], {}, {}
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if token == "--":
            errors.append("'--' ends the options, so %s would be stray arguments (%s)" % (
                argv[index:], _where(flags)))
            break
        found = _flag_token(token, flags)
        if found is None:
            errors.append("stray value %r: no flag before it takes a value (%s)" % (token, _where(flags)))
            continue
        name, explicit = found
        if name not in flags:
            prefixed = sorted(flag for flag in flags if flag.startswith(name)) if name.startswith("--") else []
            if allow_abbrev and len(prefixed) == 1:
                name = prefixed[0]
            else:
                errors.append(_unknown_flag(flags, name, prefixed))
                while index < len(argv) and _flag_token(argv[index], flags) is None:
                    index += 1  # its values, if it takes any: not worth a second error each
                continue
        entry = flags[name]
        if entry["dest"] in seen:  # argparse keeps the last silently: an extra argument would override the role's
            errors.append("%s sets %s again (%s set it earlier on the command line); argparse would keep the last "
                          "without a word: give it once (%s)" % (name, entry["dest"], seen[entry["dest"]],
                                                                 _where(flags, entry)))
        seen.setdefault(entry["dest"], name)
        if entry.get("refuses"):
            errors.append("%s: this SGLang stops the launch on it: %s (%s)" % (
                name, entry["refuses"], _where(flags, entry)))
        elif entry.get("deprecated") and notes is not None:
            notes.append("%s is deprecated in %s" % (name, _where(flags, entry)))
        if not entry["takes_value"]:
            if explicit is not None:
                errors.append("%s takes no value, got %r (%s)" % (name, explicit, _where(flags, entry)))
            parsed[entry["dest"]] = entry.get("const", True)
            continue
        nargs = entry["nargs"]
        if explicit is not None:
            values = [explicit]
        else:
            following = []
            while index + len(following) < len(argv) and _flag_token(argv[index + len(following)], flags) is None \
                    and argv[index + len(following)] != "--":
                following.append(argv[index + len(following)])
            take = len(following) if nargs in ("*", "+") else min(nargs if isinstance(nargs, int) else 1,
                                                                  len(following))
            values = following[:take]
            index += take
        need = nargs if isinstance(nargs, int) else 1 if nargs in (None, "+") else 0
        if len(values) < need:
            errors.append("%s needs %s, got %s (%s)" % (
                name, "a value" if need == 1 else "%d values" % need, "none" if not values else values,
                _where(flags, entry)))
            continue
        converted, bad = [], len(errors)
        for value in values:
            try:
                value = _convert(value, entry["type"])
            except ValueError:
                errors.append("%s: %r is not a valid %s (%s)" % (name, value, entry["type"], _where(flags, entry)))
                continue
            if entry["choices"] is not None and not _in_choices(value, entry["choices"], entry["type"]):
                errors.append("%s: %r is not one of %s (%s)" % (
                    name, value, ", ".join(str(choice) for choice in entry["choices"]), _where(flags, entry)))
            converted.append(value)
        if len(errors) > bad:
            continue  # a value argparse would refuse is not reported as parsed
        if nargs in (None, "?"):
            parsed[entry["dest"]] = converted[0] if converted else entry.get("const")
        else:
            parsed[entry["dest"]] = converted
    if not any(token == "--config" or token.startswith("--config=") for token in argv):  # a config may set them
        for flag, entry in flags.items():
            if entry.get("required") and entry["dest"] not in seen and flag == _first_flag(flags, entry):
                errors.append("%s is required (%s)" % (flag, _where(flags, entry)))
    return errors, parsed


def _first_flag(flags, entry):
    return next(flag for flag, other in flags.items() if other is entry)  # declaration order: the primary name


def _unknown_flag(flags, name, prefixed):
    if len(prefixed) == 1:
        hint = "argparse would expand this abbreviation to %s; write it out (did you mean %s?)" % (
            prefixed[0], prefixed[0])
    elif prefixed:
        hint = "ambiguous abbreviation of %s" % ", ".join(prefixed[:6])
    else:
        close = difflib.get_close_matches(name, list(flags), n=3, cutoff=0.6)
        hint = "did you mean %s?" % " or ".join(close) if close else "no similar flag"
    return "unknown flag %s: %s (%s)" % (name, hint, _where(flags))
