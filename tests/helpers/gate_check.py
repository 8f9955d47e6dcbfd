"""An independent check that a patched SGLang admits SM120 at every fusion gate.

Deliberately written differently from module_utils/fusion_guards.py (text of
each ``or`` test via ``ast.unparse``, not operand classification), so a bug in
the module's site finder does not hide itself here.
"""
import ast
import re

GUARD_FUNCTIONS = {"flashinfer_ar_fusion_applies", "apply_flashinfer_allreduce_fusion",
                   "_gather_hidden_states_and_residual", "_resolve_backend"}


def _top_level_names(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            names.add(getattr(node, "name", ""))
    for stmt in tree.body:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            if isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def gate_report(source):
    """[(function, test text, admits_sm120)] for every 'sm90 or sm100' test; plus unresolved names."""
    tree = ast.parse(source)
    report = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or func.name not in GUARD_FUNCTIONS:
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                text = ast.unparse(node)
                if re.search(r"sm_?90", text) and re.search(r"sm_?100", text):
                    report.append((func.name, text, bool(re.search(r"sm_?12\d", text))))
    bound = _top_level_names(tree)
    unresolved = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                         and re.search(r"sm_?12\d", n.id) and n.id not in bound})
    return report, unresolved


def multicast_failure_raises(source):
    """True when a failed cuMulticastGetGranularity query still raises (G3 not admitted)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for index, stmt in enumerate(body[:-1]):
            if "cuMulticastGetGranularity" in ast.unparse(stmt) and isinstance(stmt, ast.Assign):
                check = body[index + 1]
                if any(isinstance(s, ast.Raise) for s in check.body):
                    return True
    return False
