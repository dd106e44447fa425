"""The no-credit rule, read from the submission's source (the notebook the grader holds, never the
kernel's word): under ``checks.no_library_shortcut`` a call earns nothing when the submission's code
reaches a blocked library function from the called function, by name, alias or import.
"""
from __future__ import annotations

import ast
import sys
import types

from lmpolicy import checks

# The submission's code cells above the test cell that runs now (``in_kernel.bind`` sets them).
SOURCES: list[str] = []


def leaf(fn) -> str:
    return getattr(fn, "__name__", "")


def address(fn) -> tuple[str, str]:
    """(module, qualified name) by which the submission's process finds the same library function."""
    owner = getattr(fn, "__objclass__", None)
    if owner is not None:  # a C method such as torch.Tensor.softmax
        return owner.__module__, f"{owner.__qualname__}.{fn.__name__}"
    if isinstance(fn, types.FunctionType):
        return fn.__module__, fn.__qualname__
    return fn.__module__, fn.__name__  # a builtin: torch.softmax's qualname names an internal class


def _imported(node, alias) -> set[str]:
    """What one alias of an import reaches: the imported name, unless it is a module already loaded
    here (``from lmpolicy.exact import kl`` imports the module kl, not the function kl.kl). Nothing
    is imported to find out: a submission's folder may hold a module of any name."""
    if isinstance(node, ast.Import):
        return set(alias.name.split("."))
    module = "." * node.level + (node.module or "")
    if node.level == 0 and isinstance(sys.modules.get(f"{module}.{alias.name}"), types.ModuleType):
        return set()
    return {alias.name}


def _reached_names(statement, name: str) -> tuple[set[str], set[str]]:
    """(names the statement reads, library names it reaches: attributes, imports, name strings),
    for the statement as a maker of ``name`` (an import: only the alias that binds it)."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        aliases = [a for a in statement.names if (a.asname or a.name).split(".")[0] == name]
        return set(), set().union(*(_imported(statement, a) for a in aliases))
    reads, reaches = set(), set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.add(node.id)
        elif isinstance(node, ast.Attribute):
            reaches.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            reaches.update(*(_imported(node, a) for a in node.names))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            reaches.add(node.value)
    return reads, reaches


def library_shortcut(sources, name: str, blocked_names: set[str]) -> str | None:
    """How the submission's code reaches a blocked library function from ``name``, or None.

    Follows the top-level statements that made what ``name`` is when the tests run (its last def,
    assignment or import, and any later ``__code__`` swap or conditional rebinding) and,
    transitively, the statements that made the global names those read.
    """
    makers: dict[str, list] = {}
    for statement in checks.statements(sources):
        anew, changed = checks.bound_names(statement)
        for bound in anew:
            makers[bound] = [statement]
        for bound in changed:
            makers.setdefault(bound, []).append(statement)
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for statement in makers.get(current, ()):
            reads, reaches = _reached_names(statement, current)
            found = sorted(reaches & blocked_names)
            if found:
                how = "" if current == name else f" through {current}"
                return f"your {name}{how} uses the library's {found[0]}"
            todo.extend(reads - seen)
    return None
