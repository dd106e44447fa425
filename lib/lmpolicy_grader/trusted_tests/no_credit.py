"""The no-credit rule, read from the submission's source (the notebook the grader holds, never the
kernel's word): under ``checks.no_library_shortcut`` a call earns nothing when the submission's code
reaches a blocked library function from the called function, by name, alias or import, or reaches
anything by a way this reading cannot follow (``opaque``: a computed attribute name, ``exec`` or
``eval``, a code object, the source or file of a module, IPython's output history, a module of the
submission's own folder, a part of torch or numpy outside the list it follows: ``FOLLOWED_MODULES``).

The functions of the student library that answer the notebook's exercises are not in the submission's
process at all (``isolation.library_view``); for those the rule is a second line. It is the only one
between the submission and torch's and numpy's own functions (``torch.softmax``).

It reads what the tested function reaches; how the tested name is made, and which constructs the
notebook's cells may use at all, is the code rule (``lmpolicy.notebook.code_rule``), which every test cell applies first.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
import types
from functools import lru_cache

from lmpolicy.notebook import checks

# The submission's code cells above the test cell that runs now (``in_kernel.bind`` sets them).
SOURCES: list[str] = []


def leaf(fn) -> str:
    return getattr(fn, "__name__", "")


# What answers the same as a blocked function under another name (a test names only the blocked one).
ALSO_ANSWERS = {
    "softmax": {"softmin", "Softmax", "Softmin", "LogSoftmax", "Categorical", "OneHotCategorical"},
    "log_softmax": {"softmin", "Softmax", "Softmin", "LogSoftmax", "Categorical", "OneHotCategorical"},
}

# Ways to reach an object or run code that a reading of names cannot follow.
OPAQUE_CALLS = {"exec", "eval", "compile", "__import__", "globals", "vars", "locals", "open", "get_ipython",
                "attrgetter", "methodcaller", "import_module", "getsource", "getsourcelines", "getmembers",
                "FunctionType", "CodeType", "LambdaType", "MethodType", "run_path", "run_module", "reload"}
OPAQUE_ATTRIBUTES = {"__code__", "__globals__", "__dict__", "__builtins__", "__getattribute__", "__closure__",
                     "__func__", "__wrapped__", "__self__", "__file__", "__loader__", "__spec__", "__subclasses__",
                     "__reduce__", "__reduce_ex__", "__defaults__", "__kwdefaults__", "f_globals", "f_locals", "f_back",
                     "user_ns"}
# (open() is refused; os or pathlib reads are not, since running what they read needs exec, compile or an import.)
OPAQUE_MODULES = {"importlib", "inspect", "marshal", "pickle", "dill", "cloudpickle", "ctypes", "gc", "runpy",
                  "code", "codeop", "builtins", "dis", "linecache"}
# IPython's history of inputs and outputs: Out[3] may hold torch.softmax, shown by an earlier cell.
OPAQUE_NAMES = re.compile(r"__builtins__|In|Out|_oh|_ih|_dh|_+|_i+|_\d+|_i\d+|__builtin__")


# The parts of torch and numpy whose functions this reading follows by name: their arithmetic, autograd, optimisers,
# random numbers and array views. Any other part of them compiles code from a string (torch.jit, torch.fx), hands out
# functions chosen at run time (torch.overrides, torch.ops, torch.library, torch._C) or holds a library's kernels under
# names no declaration lists (torch.distributions.utils), so code on the way to a tested function that reaches one
# gets no credit, whatever it calls there.
FOLLOWED_MODULES = frozenset({
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.linalg", "torch.special",
    "torch.fft", "torch.autograd", "torch.autograd.functional", "torch.optim", "torch.random", "torch.distributions",
    "numpy", "numpy.linalg", "numpy.random", "numpy.fft", "numpy.char", "numpy.lib", "numpy.lib.stride_tricks",
})
FOLLOWED_PACKAGES = frozenset(name.split(".")[0] for name in FOLLOWED_MODULES)


def _unfollowed(module: str) -> bool:
    """Whether ``module`` (a dotted name) is a part of torch or numpy this reading does not follow."""
    return module.split(".")[0] in FOLLOWED_PACKAGES and module not in FOLLOWED_MODULES


@lru_cache(maxsize=4096)
def _submodule(module: str, attribute: str) -> str | None:
    """The dotted name of the module ``module.attribute`` is, or None if it is no module. Of a followed package only the
    package itself is imported (torch or numpy, which the trusted kernel holds anyway); an attribute already set is read
    from the module's own namespace, any other is looked up as a submodule's spec."""
    top = module.split(".")[0]
    if top in FOLLOWED_PACKAGES and top not in sys.modules:
        importlib.import_module(top)
    parent = sys.modules.get(module)
    value = vars(parent).get(attribute) if isinstance(parent, types.ModuleType) else None
    if isinstance(value, types.ModuleType):
        return getattr(value, "__name__", None) or f"{module}.{attribute}"
    if value is not None or module.split(".")[0] not in FOLLOWED_PACKAGES:
        return None
    try:
        return f"{module}.{attribute}" if importlib.util.find_spec(f"{module}.{attribute}") is not None else None
    except (ImportError, ValueError, AttributeError):
        return None


def module_names(sources) -> dict[str, str]:
    """The names the submission's imports bind to a module of a followed package (``F`` -> ``torch.nn.functional``)."""
    found = {}
    for statement in checks.statements(sources):
        for node in ast.walk(statement):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    module = _submodule(node.module, alias.name)
                    if module:
                        found[alias.asname or alias.name] = module
    return {name: module for name, module in found.items() if module.split(".")[0] in FOLLOWED_PACKAGES}


def _attribute_path(node, modules: dict[str, str]) -> list[str] | None:
    """``node``'s attribute chain from a module name (``torch.jit.CompilationUnit`` -> [torch, jit,
    CompilationUnit], with ``getattr(m, "name")`` read as ``m.name``), or None if it starts elsewhere."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name) and node.id in modules:
            return [modules[node.id], *reversed(parts)]
        else:
            return None


def _as_maker_of(statement, name: str | None):
    """``statement`` as a maker of ``name``: an import reduced to the aliases that bind it."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)) and name is not None:
        return type(statement)(**{**vars(statement), "names": [
            alias for alias in statement.names if (alias.asname or alias.name).split(".")[0] == name]})
    return statement


def unfollowed_module(statement, modules: dict[str, str], name: str | None = None) -> str | None:
    """The first part of torch or numpy outside ``FOLLOWED_MODULES`` that ``statement`` (as a maker of ``name``)
    reaches, by an import or an attribute chain from a module name, or a module of them it uses as a value, in words
    with its line; or None."""
    statement = _as_maker_of(statement, name)
    as_roots = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Attribute):
            as_roots.add(id(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and node.args:
            as_roots.add(id(node.args[0]))
    for node in ast.walk(statement):
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                names = [alias.name] if module is None else [module, f"{module}.{alias.name}"]
                for name in names:
                    reached = _submodule(*name.rsplit(".", 1)) if "." in name else name
                    reached = reached or (name if name == module else None)
                    if reached and _unfollowed(reached):
                        return f"{reached}, a part of {reached.split('.')[0]} the grader does not follow (line {line} of its cell)"
        elif isinstance(node, ast.Name) and node.id in modules and isinstance(node.ctx, ast.Load) \
                and id(node) not in as_roots:
            return f"the module {modules[node.id]} used as a value (line {line} of its cell)"
        elif isinstance(node, (ast.Attribute, ast.Call)) and id(node) not in as_roots:
            path = _attribute_path(node, modules)
            module = path[0] if path else None
            for attribute in (path or [])[1:]:
                module = _submodule(module, attribute)
                if module is None:
                    break
                if _unfollowed(module):
                    return f"{module}, a part of {module.split('.')[0]} the grader does not follow (line {line} of its cell)"
            if path and len(path) > 1 and module is not None:  # the chain ends at a module (F.torch), held as a value
                return f"the module {module} used as a value (line {line} of its cell)"
    return None


def _own_module(name: str) -> bool:
    """A top-level module the trusted kernel cannot find: a file of the submission's folder."""
    if name in sys.modules:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


def opaque(statement, name: str | None = None) -> str | None:
    """The first thing in ``statement`` that reaches an object or runs code by a way the rule cannot
    follow, in words (with its line in the cell), or None. For an import, only the alias that binds
    ``name`` counts (``import builtins, torch`` makes torch like any import of it)."""
    statement = _as_maker_of(statement, name)
    for node in ast.walk(statement):
        found = None
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if callee in ("getattr", "setattr", "delattr", "hasattr") and not (
                    len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
                found = f"{callee} with a computed name"
            elif callee in OPAQUE_CALLS:
                found = f"{callee}(...)"
        elif isinstance(node, ast.Attribute) and (node.attr in OPAQUE_ATTRIBUTES or (
                node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys")):
            found = f".{node.attr}"
        elif isinstance(node, ast.Name) and OPAQUE_NAMES.fullmatch(node.id) and isinstance(node.ctx, ast.Load):
            found = f"IPython's history ({node.id})"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                top = (alias.name if isinstance(node, ast.Import) else (node.module or "")).split(".")[0]
                level = getattr(node, "level", 0)
                if level == 0 and top in OPAQUE_MODULES:
                    found = f"import {top}"
                elif level or _own_module(top):
                    found = f"a module of your own folder ({top or alias.name})"
        if found:
            return f"{found} (line {getattr(node, 'lineno', '?')} of its cell)"
    return None


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
        reaches = set().union(*(_imported(statement, a) for a in aliases))
        module = getattr(statement, "module", None) or ""
        if aliases and not getattr(statement, "level", 0) and module.split(".")[0] in FOLLOWED_PACKAGES:
            reaches |= set(module.split("."))  # the part of torch it comes from (``from torch.distributions import ...``)
        return set(), reaches
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


def _changed_by(statement) -> set[str]:
    """The names an opaque statement that binds nothing may change through a call: ``exec(source,
    namespace)`` fills namespace, ``namespace.update(vars(module))`` too."""
    if not isinstance(statement, ast.Expr) or not opaque(statement):
        return set()
    names = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            names |= {arg.id for arg in [*node.args, *(k.value for k in node.keywords)] if isinstance(arg, ast.Name)}
            if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                names.add(node.func.value.id)
    return names


def library_shortcut(sources, name: str, blocked_names) -> str | None:
    """How the submission's code reaches a blocked library function from ``name``, as the feedback says it (and
    that it gets no credit), or None. ``blocked_names`` holds names, and may hold compiled patterns
    (``re.compile(r"_+softmax\\w*")``) that a reached name matches in full.

    Follows the top-level statements that made what ``name`` is when the tests run (its last def,
    assignment or import, and any later ``__code__`` swap or conditional rebinding) and,
    transitively, the statements that made the global names those read; a top-level statement that
    only reads one of those names (``exec(source, namespace)``) counts as a maker of it if it is opaque.
    """
    makers: dict[str, list] = {}
    for statement in checks.statements(sources):
        anew, changed = checks.bound_names(statement)
        for bound in anew:
            makers[bound] = [statement]
        for bound in changed:
            makers.setdefault(bound, []).append(statement)
        for changed_by_call in _changed_by(statement):
            makers.setdefault(changed_by_call, []).append(statement)
    modules = module_names(sources)
    patterns = [blocked for blocked in blocked_names if isinstance(blocked, re.Pattern)]
    blocked_names = {blocked for blocked in blocked_names if isinstance(blocked, str)}
    blocked_names |= set().union(*(ALSO_ANSWERS.get(blocked, ()) for blocked in blocked_names))
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for statement in makers.get(current, ()):
            reads, reaches = _reached_names(statement, current)
            found = sorted(reach for reach in reaches
                           if reach in blocked_names or any(pattern.fullmatch(reach) for pattern in patterns))
            how = "" if current == name else f" through {current}"
            if found:
                return f"your {name}{how} uses the library's {found[0]}, which gets no credit"
            hidden = opaque(statement, current) or unfollowed_module(statement, modules, current)
            if hidden:
                return (f"your {name}{how} reaches code by a way the grader cannot check, {hidden}, which gets no "
                        "credit: write it with plain names")
            todo.extend(reads - seen)
    return None
