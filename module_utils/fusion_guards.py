# -*- coding: utf-8 -*-
"""Find SGLang's FlashInfer allreduce-fusion architecture gates and admit SM120.

Pure logic: source bytes in, planned edits out. No file is read or written here.
Sites are found by code structure (the ``ast`` of each file), never by line
number or one exact string, so formatting, line breaks, operand order and the
three name forms (``_is_sm90_supported``, ``is_sm90_supported()``,
``get_platform().is_sm90``) are all recognised.

Gates (see shared reference ``sm120-fusion.md``):
  G1  runtime architecture guard: ``(sm90 or sm100)`` inside the function that
      decides whether a layer uses the fused kernel (communicator.py up to
      0.5.19, layer_boundary/residual/add_norm.py from 0.5.21).
  G2  backend resolution: ``if not (sm90 or sm100): raise`` in
      ``_resolve_backend`` of flashinfer_comm_fusion.py (0.5.14+).
  G3  workspace preflight: a failed ``cuMulticastGetGranularity`` query raises,
      and the ranks vote fusion off on systems without multicast (PCIe SM120).
"""
from __future__ import annotations

import ast
import re

MARK = "sglang_fusion_patch"

G1_FILES = (
    "sglang/srt/layers/layer_boundary/residual/add_norm.py",
    "sglang/srt/layers/communicator.py",
)
G1_FUNCTIONS = (
    "flashinfer_ar_fusion_applies",
    "apply_flashinfer_allreduce_fusion",
    "_gather_hidden_states_and_residual",
)
FUSION_FILE = "sglang/srt/layers/flashinfer_comm_fusion.py"
G2_FUNCTION = "_resolve_backend"
G3_CALL = "cuMulticastGetGranularity"
# Where SGLang defines the helpers an added SM120 operand may call.
SM120_HELPER_SOURCES = {
    "is_sm120_supported": ("sglang/srt/utils/common.py", "sglang/srt/utils.py"),
    "is_sm120": ("sglang/srt/runtime_context.py", "sglang/srt/platforms"),
}

_ARCH_NAME = re.compile(r"^_?is_sm(\d+)(?:_supported)?$")
_SM100_TOKEN = re.compile(r"(_?is_sm)100(?=(?:_supported)?\b)")
_SM12X_TOKEN = re.compile(r"(_?is_sm)12\d(?=(?:_supported)?\b)")


class LayoutError(Exception):
    """The installed SGLang does not have a guard layout this module knows."""


class Site(object):
    """One gate in one file."""

    def __init__(self, gate, path, function, line, before, after, admitted):
        self.gate = gate
        self.path = path
        self.function = function
        self.line = line
        self.before = before
        self.after = after
        self.admitted = admitted  # True: already admits SM120, nothing to do

    def as_dict(self):
        return {
            "gate": self.gate,
            "file": self.path,
            "function": self.function,
            "line": self.line,
            "before": self.before,
            "after": self.after,
            "status": "already_admitted" if self.admitted else "patch",
        }


class _Source(object):
    """Source bytes with byte offsets for ast positions (col_offset is in UTF-8 bytes)."""

    def __init__(self, path, data):
        self.path = path
        self.data = data
        try:
            self.tree = ast.parse(data, filename=path)
        except SyntaxError as exc:
            raise LayoutError("%s: cannot parse (%s); run the module with the venv's own Python "
                              "(ansible_python_interpreter) if it is newer than this one" % (path, exc))
        self.line_starts = [0]
        for index, byte in enumerate(data):
            if byte == 0x0A:
                self.line_starts.append(index + 1)
        self.edits = []  # (start, end, replacement bytes)
        self.parents = {}
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent

    def offset(self, line, col):
        return self.line_starts[line - 1] + col

    def start(self, node):
        return self.offset(node.lineno, node.col_offset)

    def end(self, node):
        return self.offset(node.end_lineno, node.end_col_offset)

    def text(self, node):
        return self.data[self.start(node):self.end(node)].decode("utf-8")

    def line_end(self, line):
        """Offset just past the newline that ends ``line`` (or end of data)."""
        return self.line_starts[line] if line < len(self.line_starts) else len(self.data)

    def indent_of(self, node):
        start = self.line_starts[node.lineno - 1]
        return self.data[start:start + node.col_offset].decode("utf-8")

    def add(self, start, end, text):
        self.edits.append((start, end, text.encode("utf-8")))

    def patched(self):
        out = self.data
        last = None
        for start, end, text in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            if last is not None and end > last:
                raise LayoutError("%s: overlapping edits planned; refusing" % self.path)
            out = out[:start] + text + out[end:]
            last = start
        return out


def arch_of(node):
    """SM number named by an operand: _is_sm90_supported, is_sm90_supported(), x.is_sm90."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        match = _ARCH_NAME.match(node.id)
    elif isinstance(node, ast.Attribute):
        match = _ARCH_NAME.match(node.attr)
    else:
        return None
    return int(match.group(1)) if match else None


def _is_sm12x(arch):
    return arch is not None and 120 <= arch < 130


def _gate_ors(node):
    """BoolOp(Or) nodes below ``node`` that test both sm90 and sm100."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.BoolOp) and isinstance(sub.op, ast.Or):
            archs = [arch_of(value) for value in sub.values]
            if 90 in archs and 100 in archs:
                found.append(sub)
    return found


def _functions(tree, names):
    return [node for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names]


def _module_bindings(tree):
    """Names bound at module scope (also inside top-level if/try blocks)."""
    names = {}

    def visit(body):
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for alias in stmt.names:
                    names.setdefault((alias.asname or alias.name).split(".")[0], stmt)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name):
                            names.setdefault(sub.id, stmt)
            elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
                names.setdefault(stmt.target.id, stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.setdefault(stmt.name, stmt)
            elif isinstance(stmt, ast.If):
                visit(stmt.body)
                visit(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                visit(stmt.body)
                for handler in stmt.handlers:
                    visit(handler.body)
                visit(stmt.orelse)
                visit(stmt.finalbody)
    visit(tree.body)
    return names


def _enclosing_function(src, node):
    while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node = src.parents.get(node)
    return node.name if node is not None else "<module>"


class _Planner(object):
    """Plans the edits for one file; ``helpers`` says which SM120 helpers SGLang defines."""

    def __init__(self, src, helpers):
        self.src = src
        self.helpers = helpers
        self.bindings = _module_bindings(src.tree)
        self.pending_defs = {}  # name -> text inserted once per file

    def sm120_operand(self, sm100_node):
        return _SM100_TOKEN.sub(r"\g<1>120", self.src.text(sm100_node))

    def ensure_resolves(self, node):
        """Make the names an SM120 operand uses exist in this file, mirroring sm100's."""
        if isinstance(node, ast.Call):
            node = node.func
        if isinstance(node, ast.Attribute):
            if not self.helpers.get(node.attr):
                raise LayoutError("%s: %s needs the platform attribute is_sm120, which this SGLang "
                                  "does not define (looked in %s)" % (
                                      self.src.path, self.src.text(node),
                                      ", ".join(SM120_HELPER_SOURCES["is_sm120"])))
            return
        if not isinstance(node, ast.Name):
            return
        name = node.id
        if name in self.bindings or name in self.pending_defs:
            return
        sm100_name = _SM12X_TOKEN.sub(r"\g<1>100", name)
        if name.startswith("_"):
            self._define_module_flag(name, sm100_name)
        else:
            self._import_helper(name, sm100_name)

    def _define_module_flag(self, name, sm100_name):
        stmt = self.bindings.get(sm100_name)
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            raise LayoutError("%s: %s is used but not defined, and there is no module-level "
                              "'%s = ...' to mirror" % (self.src.path, name, sm100_name))
        value = _SM100_TOKEN.sub(r"\g<1>120", self.src.text(stmt.value))
        text = "%s%s = %s  # %s: SM120 (RTX PRO 6000 Blackwell)\n" % (
            self.src.indent_of(stmt), name, value, MARK)
        self.pending_defs[name] = text
        # The value may itself need a helper (is_sm120_supported) or attribute.
        for sub in ast.walk(stmt.value):
            if arch_of(sub) == 100 and isinstance(sub, (ast.Name, ast.Attribute)) and \
                    not isinstance(self.src.parents.get(sub), ast.Attribute):
                helper = _SM100_TOKEN.sub(r"\g<1>120", sub.id if isinstance(sub, ast.Name) else sub.attr)
                if isinstance(sub, ast.Name):
                    if helper not in self.bindings and helper not in self.pending_defs:
                        self._import_helper(helper, sub.id)
                elif not self.helpers.get(helper):
                    raise LayoutError("%s: platform attribute %s does not exist in this SGLang" % (
                        self.src.path, helper))
        pos = self.src.line_end(stmt.end_lineno)
        self.src.add(pos, pos, text)

    def _import_helper(self, name, sm100_name):
        if not self.helpers.get(name):
            raise LayoutError("%s: needs %s(), which this SGLang does not define (looked in %s)" % (
                self.src.path, name, ", ".join(SM120_HELPER_SOURCES.get(name, ("sglang.srt.utils",)))))
        stmt = self.bindings.get(sm100_name)
        if not isinstance(stmt, ast.ImportFrom) or stmt.level:
            raise LayoutError("%s: needs %s but %s is not imported with 'from ... import' at "
                              "module level to mirror" % (self.src.path, name, sm100_name))
        text = "%sfrom %s import %s  # %s: SM120\n" % (self.src.indent_of(stmt), stmt.module, name, MARK)
        self.pending_defs[name] = text
        pos = self.src.line_end(stmt.end_lineno)
        self.src.add(pos, pos, text)

    def or_gate(self, gate, boolop):
        """Plan SM120 for one (sm90 or sm100) test; returns the Site."""
        values = boolop.values
        archs = [arch_of(value) for value in values]
        before = self.src.text(boolop)
        function = _enclosing_function(self.src, boolop)
        existing = [value for value, arch in zip(values, archs) if _is_sm12x(arch)]
        if existing:
            for value in existing:  # a hand edit (sed) may name an undefined flag
                self.ensure_resolves(value)
            return Site(gate, self.src.path, function, boolop.lineno, before, before, True)
        sm100 = values[archs.index(100)]
        operand = self.sm120_operand(sm100)
        probe = ast.parse(operand, mode="eval").body
        self.ensure_resolves(probe)
        end = self.src.end(sm100)
        self.src.add(end, end, " or %s" % operand)
        after = before[:end - self.src.start(boolop)] + " or " + operand + before[end - self.src.start(boolop):]
        return Site(gate, self.src.path, function, boolop.lineno, before, after, False)


def find_g1(src, planner):
    sites = []
    for func in _functions(src.tree, G1_FUNCTIONS):
        for boolop in _gate_ors(func):
            sites.append(planner.or_gate("G1", boolop))
    return sites


def find_g2(src, planner):
    funcs = _functions(src.tree, (G2_FUNCTION,))
    if not funcs:
        return []
    sites = []
    for func in funcs:
        for boolop in _gate_ors(func):
            sites.append(planner.or_gate("G2", boolop))
        if not sites:
            raise LayoutError("%s: %s() exists but holds no '(sm90 or sm100)' architecture test; "
                              "layout not recognised" % (src.path, G2_FUNCTION))
    return sites


def _is_multicast_query(stmt):
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return False
    target, value = stmt.targets[0], stmt.value
    if not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(value, ast.Call)):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == G3_CALL


def find_g3(src):
    """The raise after a failed multicast granularity query becomes a unicast fallback."""
    sites = []
    for parent in ast.walk(src.tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(parent, field, None)
            if not isinstance(body, list):
                continue
            for index, stmt in enumerate(body):
                if not _is_multicast_query(stmt):
                    continue
                err_name, gran = stmt.targets[0].elts
                check = body[index + 1] if index + 1 < len(body) else None
                function = _enclosing_function(src, stmt)
                names = {n.id for n in ast.walk(check.test) if isinstance(n, ast.Name)} if isinstance(check, ast.If) else set()
                if not (isinstance(check, ast.If) and isinstance(err_name, ast.Name)
                        and err_name.id in names and isinstance(gran, ast.Name)):
                    raise LayoutError("%s: %s() calls %s but the result check that follows is not "
                                      "'if <err> != SUCCESS: ...'; layout not recognised" % (
                                          src.path, function, G3_CALL))
                before = src.data[src.line_starts[check.lineno - 1]:src.line_end(check.end_lineno)]
                before = before.decode("utf-8").rstrip("\n")
                raises = [s for s in check.body if isinstance(s, ast.Raise)]
                if not raises:
                    sites.append(Site("G3", src.path, function, check.lineno, before, before, True))
                    continue
                first, last = check.body[0], check.body[-1]
                start = src.line_starts[first.lineno - 1]
                end = src.line_end(last.end_lineno)
                text = ("%s# %s: no multicast on PCIe-only GPUs (SM120); the trtllm workspace is unicast,\n"
                        "%s# so fall back to the allocation granularity instead of voting fusion off.\n"
                        "%s%s = 1\n") % (src.indent_of(first), MARK, src.indent_of(first),
                                         src.indent_of(first), gran.id)
                src.add(start, end, text)
                after = (before.split("\n")[0] + "\n" + text).rstrip("\n")
                sites.append(Site("G3", src.path, function, check.lineno, before, after, False))
    return sites


def analyze_file(path, data, helpers, gates, g3=True):
    """Plan one file. ``gates`` lists which gate finders apply to this path."""
    src = _Source(path, data)
    planner = _Planner(src, helpers)
    sites = []
    if "G1" in gates:
        sites += find_g1(src, planner)
    if "G2" in gates:
        sites += find_g2(src, planner)
    if "G3" in gates and g3:
        sites += find_g3(src)
    return sites, src.patched()


def plan(files, helpers, g3=True):
    """Plan every guard file.

    ``files`` maps package-relative path -> bytes for the paths that exist.
    Returns (layout name, sites, {path: new bytes}) or raises LayoutError.
    """
    sites = []
    new = {}
    present = [path for path in G1_FILES if path in files]
    for path in present:
        file_sites, data = analyze_file(path, files[path], helpers, ("G1",))
        sites += file_sites
        new[path] = data
    if not [site for site in sites if site.gate == "G1"]:
        raise LayoutError(
            "no G1 runtime architecture guard found: looked for '(sm90 or sm100)' (any name form) in "
            "functions %s of %s; found files: %s. Layout not recognised, nothing written." % (
                ", ".join(G1_FUNCTIONS), " / ".join(G1_FILES), ", ".join(present) or "none"))
    if FUSION_FILE in files:
        file_sites, data = analyze_file(FUSION_FILE, files[FUSION_FILE], helpers, ("G2", "G3"), g3)
        sites += file_sites
        new[FUSION_FILE] = data
    g1_path = sorted({s.path for s in sites if s.gate == "G1"})[0]
    layout = "%s:%s" % (g1_path.split("/")[-1][:-3],
                        "+".join(sorted({s.function for s in sites if s.gate == "G1"})))
    for gate, name in (("G2", "backend"), ("G3", "preflight")):
        if any(site.gate == gate for site in sites):
            layout += "+" + name
    changed = {path: data for path, data in new.items() if data != files[path]}
    return layout, sites, changed


def verify_admitted(files, helpers, g3=True):
    """Re-plan patched sources: every gate must admit SM120 and need no further edit."""
    _layout, sites, changed = plan(files, helpers, g3)
    pending = [site for site in sites if not site.admitted]
    return not pending and not changed, sites


def _argument_nodes(sources):
    """Every AST node of SGLang's argument sources, (path, bytes) each; a file that does not parse is passed over."""
    for path, data in sources:
        try:
            tree = ast.parse(data, filename=path)
        except SyntaxError:
            continue
        yield from ast.walk(tree)


def server_flag(sources):
    """CLI flag that turns fusion on, read from SGLang's own argument definitions.

    ``sources`` is a list of (path, bytes) of server_args.py and arg_groups/fields/*.py.
    0.5.14+ declares ``flashinfer_allreduce_fusion_backend`` (choose trtllm: the one-shot
    unicast kernel; mnnvl needs NVLink); older releases have a boolean flag.
    """
    backend_field = bool_flag = False
    for node in _argument_nodes(sources):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == "flashinfer_allreduce_fusion_backend":
            backend_field = True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == "--flashinfer-allreduce-fusion-backend":
                backend_field = True
            elif node.value == "--enable-flashinfer-allreduce-fusion":
                bool_flag = True
    if backend_field:
        return ["--flashinfer-allreduce-fusion-backend", "trtllm"]
    if bool_flag:
        return ["--enable-flashinfer-allreduce-fusion"]
    return []


NO_FUSION_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"
_NO_FUSION_FIELD = "enforce_disable_flashinfer_allreduce_fusion"


def _name_of(node):
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)


def _annotated_cli_name(annotation, field):
    """The flag an annotated field ``name: A[T, "help" | Arg(...), ...]`` becomes (0.5.14+), or None.

    As ``arg_utils.add_cli_args_from_dataclass`` does it: the first help string or ``Arg(...)`` makes the field a
    flag, ``--name-with-dashes`` unless ``Arg(cli_name=...)`` renames it; ``Arg(no_cli=True)`` hides it; a field with
    only ``NS(...)``/``Derived(...)`` metadata, or a plain annotation, is not a flag.
    """
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body  # a quoted annotation
        except SyntaxError:
            return None
    if not isinstance(annotation, ast.Subscript) or _name_of(annotation.value) not in ("A", "Annotated"):
        return None
    args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    own = "--" + field.replace("_", "-")
    for meta in args[1:]:
        if isinstance(meta, ast.Call) and _name_of(meta.func) == "Arg":
            keywords = dict((k.arg, k.value) for k in meta.keywords if k.arg)
            hidden = keywords.get("no_cli")
            if isinstance(hidden, ast.Constant) and hidden.value is True:
                return None
            renamed = keywords.get("cli_name")
            if renamed is not None:
                return renamed.value if isinstance(renamed, ast.Constant) else None
            return own
        if isinstance(meta, (ast.JoinedStr, ast.BinOp)) or \
                (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
            return own
    return None


def server_no_fusion_flag(sources):
    """CLI flag that keeps fusion off, read from SGLang's own argument definitions; [] where it declares none.

    SGLang turns FlashInfer allreduce fusion on by itself on SM90/SM100 for the architectures it knows
    (DeepseekV3ForCausalLM, KimiK25ForConditionalGeneration, ...) when tp > 1 and no fusion flag is given; only
    ``--enforce-disable-flashinfer-allreduce-fusion`` (a boolean, 0.5.14+) overrides that. ``sources`` as for
    ``server_flag``: the flag counts where an ``add_argument`` call declares it or an annotated field becomes it.
    """
    for node in _argument_nodes(sources):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                node.target.id == _NO_FUSION_FIELD:
            if _annotated_cli_name(node.annotation, node.target.id) == NO_FUSION_FLAG:
                return [NO_FUSION_FLAG]
        elif isinstance(node, ast.Call) and _name_of(node.func) == "add_argument" and \
                any(isinstance(arg, ast.Constant) and arg.value == NO_FUSION_FLAG for arg in node.args):
            return [NO_FUSION_FLAG]
    return []
