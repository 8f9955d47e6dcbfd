# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which model architectures of an installed SGLang ever call the fused all-reduce + RMSNorm kernel.

A fusion flag only sets the kernel up: the workspace, and SGLang's "FlashInfer AllReduce Fusion enabled" line before
CUDA-graph capture, come for every model. The kernel runs only where a decoder layer hands its all-reduce to a norm's
``forward_with_allreduce_fusion``: through ``LayerCommunicator`` (``layers/communicator.py``, up to 0.5.19), the stage
boundaries of ``layers/layer_boundary/`` (0.5.21 on), or a model's own call (``qwen3_5.py``, ``nemotron_h_utils.py``).
A Llama server (up to 0.5.21) never does, flag or not.

Decided from the release's own source, statically (nothing is imported, no torch needed). The nodes are the top-level
classes, functions and assignments of ``sglang/srt/layers`` and ``sglang/srt/models``; a node refers to the nodes its
code names (bases, calls, annotations, ``module.Name``), resolved through its module's imports (relative ones,
function-local ones and re-exports included). A node that reads ``<something>.forward_with_allreduce_fusion`` without
defining that method itself (a norm that defines it wraps the kernel; it does not decide to call it) routes to the
kernel, and so does every node that refers to a node that does. An architecture is fused when the class its model
module lists in ``EntryClass`` routes there: ``KimiK25ForConditionalGeneration`` (``kimi_k25.py``) builds
``DeepseekV3ForCausalLM`` (``deepseek_v2.py``), whose decoder layers hold a ``LayerCommunicator``. Architecture names
are the classes' own names, as SGLang's model registry keys them (``__name__``).

It leans to inclusion where code is shared (a class that names a routing class anywhere in its body counts): the
fusion proof fails a server whose architecture is not in the list, so a name wrongly left out would fail a fused
server, while one wrongly kept in only weakens that one check. The search runs backwards from the kernel's callers,
reading only the files that name a routing definition (a word index finds them): a release takes a few seconds of one
core. Pure: ``analyse`` takes sources, ``read_sources`` reads them from a site-packages directory.
"""
from __future__ import annotations

import ast
import os
import re

FUSED_METHOD = "forward_with_allreduce_fusion"
SCOPES = ("sglang/srt/layers", "sglang/srt/models")
MODELS_PREFIX = "sglang/srt/models/"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENTRY = re.compile(r"^EntryClass\s*(?::[^=\n]*)?=(.*?)(?=^[^\s\])}#]|\Z)", re.M | re.S)


def module_name(rel):
    """``sglang/srt/models/kimi_k25.py`` -> ``sglang.srt.models.kimi_k25`` (a package's ``__init__`` -> the package)."""
    name = rel[:-3] if rel.endswith(".py") else rel
    parts = name.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def read_sources(site_packages):
    """{relative path: source text} of every .py file under SCOPES in ``site_packages`` (unreadable files skipped)."""
    sources = {}
    for scope in SCOPES:
        top = os.path.join(site_packages, scope)
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                try:
                    with open(path, "r", encoding="utf-8", errors="replace") as handle:
                        sources[os.path.relpath(path, site_packages).replace(os.sep, "/")] = handle.read()
                except OSError:
                    continue
    return sources


def _defines_fused_method(node):
    return isinstance(node, ast.ClassDef) and any(
        isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == FUSED_METHOD
        for item in node.body)


def _dotted(node):
    """The parts of an attribute chain on a name (``a.b.c`` -> [a, b, c]), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


class _Def(object):
    """One top-level definition: the names and dotted names its code uses, and whether it calls the fused method."""

    def __init__(self, node):
        self.node = node
        self.names = set()
        self.dotted = set()
        self.calls_fused = False
        defines = _defines_fused_method(node)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                self.names.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                parts = _dotted(sub)
                if parts:
                    self.dotted.add(parts)
                if sub.attr == FUSED_METHOD and not defines and not _is_self(sub.value):
                    self.calls_fused = True


def _is_self(value):
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super"


def _statements(body):
    """Every statement, nested ones included (function and class bodies, branches, loops); no expressions."""
    stack = list(body)
    while stack:
        stmt = stack.pop()
        yield stmt
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(stmt, field, None)
            if isinstance(block, list):
                kinds = (ast.stmt, ast.excepthandler, getattr(ast, "match_case", ast.stmt))
                stack.extend(item for item in block if isinstance(item, kinds))


class _Module(object):
    """One parsed file: its top-level definitions, its imports, its EntryClass value."""

    def __init__(self, name, is_package, tree, text=""):
        self.name = name
        self.lines = text.splitlines()
        self.package = name if is_package else name.rpartition(".")[0]
        self.nodes = {}  # name -> ast node (a class, a function, or an assignment's value)
        self.classes = set()
        self.from_imports = {}  # local name -> (module, name)
        self.module_aliases = {}  # local name -> module ("import a.b as c": c -> a.b; "import a.b": a -> a)
        self.entry = None
        self._defs = {}
        self._collect(tree.body)
        for node in _statements(tree.body):  # imports anywhere: SGLang imports lazily inside functions too
            if isinstance(node, ast.ImportFrom):
                base = self._absolute(node.module, node.level)
                for alias in node.names:
                    if alias.name != "*":
                        self.from_imports.setdefault(alias.asname or alias.name, (base, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.module_aliases.setdefault(alias.asname, alias.name)
                    else:
                        head = alias.name.split(".")[0]
                        self.module_aliases.setdefault(head, head)

    def _absolute(self, module, level):
        if not level:
            return module or ""
        parts = self.package.split(".") if self.package else []
        if level > 1:
            parts = parts[:len(parts) - (level - 1)]
        return ".".join(parts + ([module] if module else []))

    def _collect(self, body):
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.nodes[stmt.name] = stmt
                if isinstance(stmt, ast.ClassDef):
                    self.classes.add(stmt.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        if target.id == "EntryClass":
                            self.entry = stmt.value
                        self.nodes.setdefault(target.id, stmt.value)
            elif isinstance(stmt, ast.If):
                self._collect(stmt.body)
                self._collect(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                for block in [stmt.body, stmt.orelse, stmt.finalbody] + [h.body for h in stmt.handlers]:
                    self._collect(block)
            elif isinstance(stmt, ast.With):
                self._collect(stmt.body)

    def mentions(self, name, word):
        """Whether the definition's own lines hold the word (a cheap test before its code is walked)."""
        node = self.nodes[name]
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        text = "\n".join(self.lines[first - 1:getattr(node, "end_lineno", None) or len(self.lines)])
        return re.search(r"\b%s\b" % re.escape(word), text) is not None

    def definition(self, name):
        if name not in self._defs:
            self._defs[name] = _Def(self.nodes[name])
        return self._defs[name]


class _Release(object):
    """The sources of one release, parsed only where the search needs them."""

    def __init__(self, sources):
        self.sources = sources
        self.rel_of = {module_name(rel): rel for rel in sources}
        self.unparsed = []
        self._modules = {}
        self._resolved = {}
        self._index = None

    def module(self, name):
        """The parsed module, or None (outside the sources, or not parseable)."""
        if name not in self._modules:
            rel = self.rel_of.get(name)
            parsed = None
            if rel is not None:
                try:
                    parsed = _Module(name, rel.endswith("__init__.py"), ast.parse(self.sources[rel], filename=rel),
                                     self.sources[rel])
                except (SyntaxError, ValueError):
                    self.unparsed.append(rel)
            self._modules[name] = parsed
        return self._modules[name]

    def files_with(self, word):
        if self._index is None:
            self._index = {}
            for rel in sorted(self.sources):
                for found in set(_WORD.findall(self.sources[rel])):
                    self._index.setdefault(found, []).append(rel)
        return self._index.get(word, [])

    def resolve(self, module, name):
        """The definition (module, name) a name of ``module`` stands for, through imports, re-exports and aliases."""
        key = (module, name)
        if key not in self._resolved:
            self._resolved[key] = None  # a cycle of imports resolves to nothing
            self._resolved[key] = self._resolve(module, name)
        return self._resolved[key]

    def _resolve(self, module, name):
        mod = self.module(module)
        if mod is None:
            return None
        if name in mod.nodes:
            value = mod.nodes[name]
            if isinstance(value, ast.Name) and value.id != name:  # Foo = Bar
                return self.resolve(module, value.id) or (module, name)
            return (module, name)
        if name in mod.from_imports:
            origin, imported = mod.from_imports[name]
            return self.resolve(origin, imported)
        return None

    def resolve_dotted(self, module, parts):
        """``alias.sub.Name`` -> the definition, where ``alias`` names a module of the sources."""
        mod = self.module(module)
        head = parts[0]
        if head in mod.module_aliases:
            base = mod.module_aliases[head].split(".")
        elif head in mod.from_imports:
            origin, imported = mod.from_imports[head]
            base = (origin.split(".") if origin else []) + [imported]
        else:
            return None
        rest = list(parts[1:])
        while rest and ".".join(base + rest[:1]) in self.rel_of:
            base, rest = base + rest[:1], rest[1:]
        if ".".join(base) not in self.rel_of or not rest:
            return None
        return self.resolve(".".join(base), rest[0])


def _search(release):
    """{definition: the next definition on its way to a caller of the fused method (None: a caller itself)}."""
    route = {}
    queue = []
    for rel in release.files_with(FUSED_METHOD):
        mod = release.module(module_name(rel))
        for name in sorted(mod.nodes) if mod else ():
            if mod.definition(name).calls_fused:
                route[(mod.name, name)] = None
                queue.append(((mod.name, name), name))
    searched = set()
    while queue:
        target, word = queue.pop(0)
        if (target, word) in searched:
            continue
        searched.add((target, word))
        for rel in release.files_with(word):
            mod = release.module(module_name(rel))
            if mod is None:
                continue
            alias = [local for local, (origin, imported) in mod.from_imports.items()
                     if imported == word and local != word and release.resolve(mod.name, local) == target]
            queue.extend((target, local) for local in alias)
            for name in sorted(mod.nodes):
                here = (mod.name, name)
                if here in route or name == "EntryClass" or not mod.mentions(name, word):
                    continue  # (EntryClass: the registry's list, which analyse() reads)
                used = mod.definition(name)
                hit = word in used.names and release.resolve(mod.name, word) == target
                if not hit:
                    hit = any(parts[-1] == word and release.resolve_dotted(mod.name, parts) == target
                              for parts in used.dotted if len(parts) > 1)
                if hit and here != target:
                    route[here] = target
                    queue.append((here, name))
    return route


def _entry_names(release, rel):
    """[(architecture, definition)] of a model module's EntryClass."""
    found = []
    for match in _ENTRY.finditer(release.sources[rel]):
        for word in _WORD.findall(match.group(1)):
            if re.search(r"^class\s+%s\b" % re.escape(word), release.sources[rel], re.M):
                found.append((word, (module_name(rel), word)))
                continue
            target = release.resolve(module_name(rel), word)
            if target and target[1] in release.module(target[0]).classes:
                found.append((target[1], target))
    return found


def analyse(sources):
    """Which architectures route their layers to the fused kernel, from ``{relative path: source}``. Pure.

    Returns {"fused": {architecture: the chain of definitions ("module:name") down to the kernel's caller},
    "unfused": [architectures registered whose layers never call it], "unparsed": [files that did not parse]}.
    """
    release = _Release(sources)
    route = _search(release)
    fused, unfused = {}, set()
    for rel in sorted(sources):
        if not rel.startswith(MODELS_PREFIX) or "EntryClass" not in sources[rel]:
            continue
        for architecture, node in _entry_names(release, rel):
            if node in route:
                chain, current = [], node
                while current is not None and len(chain) < 64:
                    chain.append("%s:%s" % current)
                    current = route[current]
                fused.setdefault(architecture, chain)
            else:
                unfused.add(architecture)
    return {"fused": fused, "unfused": sorted(unfused - set(fused)), "unparsed": sorted(release.unparsed)}


def fused_architectures(site_packages):
    """The sorted architecture names of the SGLang in ``site_packages`` whose layers call the fused kernel."""
    return sorted(analyse(read_sources(site_packages))["fused"])
