"""What a code cell binds at its top level, read from its source: the student's NameError advice, the start
page's record of which answer a check passed on, and the grader's no-credit rule read it alike."""
from __future__ import annotations

import ast


def statements(sources):
    """The top-level statements of code cells ``sources``, as IPython runs them (magics transformed);
    a cell that does not parse is skipped."""
    from IPython.core.inputtransformer2 import TransformerManager
    transformer = TransformerManager()
    for source in sources:
        try:
            yield from ast.parse(transformer.transform_cell(source)).body
        except (SyntaxError, ValueError):
            continue


def bound_names(statement) -> tuple[set[str], set[str]]:
    """(names the statement binds anew, names whose object it changes: ``f.__code__ = ...``)."""
    anew, changed = set(), set()
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}, set()  # its body binds nothing at the top level
    for node in ast.walk(statement):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            anew.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            anew.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            anew.add(node.id)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                changed.add(base.id)
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                    and isinstance(node.slice.value, str):  # globals()["softmax"] = ...
                anew.add(node.slice.value)
    if not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.Delete)):
        changed |= anew  # inside an if, for, try or with: it may or may not have run, keep what came before
        anew = set()
    return anew, changed - anew


def binds(sources) -> set[str]:
    """Every name the code cells ``sources`` may bind or change at their top level."""
    return set().union(*(set().union(*bound_names(statement)) for statement in statements(sources)))
