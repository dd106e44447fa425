"""The code rule: the constructs a graded notebook's cells may be written with, and how a tested name is made.

One judgement, three places that apply it. The grader applies it in the trusted test kernel from the
submitted source (the notebook the grader holds, never what the submission's process reports), before each
test cell runs (``lmpolicy_grader.trusted_tests.in_kernel.outside_the_rule``). The student meets the same
judgement before hand-in: Validate lists every construct outside it (``notebook_outside``, read by
``lmpolicy.notebook.validator``), and each check cell run in the student's own kernel says the first one among the
cells that kernel has run (``first_outside_in_history``, read by ``lmpolicy.notebook.checks``). The rule is an
allowlist and holds no test, input or answer: knowing it gives nobody anything but what the README says.

1. **A tested name** (a name the test cell reads that neither it nor the trusted cells define: the name the
   grader takes from the submission) is made only by a plain, undecorated ``def`` or a plain assignment
   (``name = expr``, ``name: type = expr``) at the top level of an answer cell of the test's own exercise.
   Any other binding of it in a cell above the test (in another cell, by import-as, a for/with/except
   target, ``:=``, ``global``/``nonlocal``, ``del``, a class, a decorator, a match capture, tuple unpacking,
   ``+=``, inside an if/for/try block) is outside. When no cell above the test answers its exercise (the
   answer cell deleted, which the grader does not restore), a plain making in any cell stands in for it.
2. **Every submitted code cell** (each non-test code cell, locked set-up cells included) is plain Python
   written with the constructs listed below: ``ALLOWED_NODES`` (the statement and expression kinds),
   ``ALLOWED_MODULES`` (what may be imported), ``ALLOWED_BUILTINS`` and ``ALLOWED_DUNDERS`` (the builtins and
   dunder names and attributes a cell may name). Anything not listed is refused, so a construct nobody
   thought of is refused too: ``exec``/``eval``/``compile``/``__import__``, ``globals()``/``vars()``/
   ``locals()``, ``setattr``/``delattr``, ``getattr`` with a computed name, ``sys``/``builtins``/``__main__``,
   ``importlib``/``inspect``/``ctypes``/``pickle``/``gc``, threads, processes, ``asyncio``, ``signal``,
   ``atexit``, ``get_ipython`` and its hooks, ``__dict__``/``__code__``/``__globals__``. A cell that does not
   parse as plain Python (an IPython ``%magic`` or ``!shell`` line, a syntax error) is outside.
   Attributes are the one part judged by a list of refusals (``INTERPRETER_HANDLES``: the names under which
   an allowed module hands out the interpreter, ``typing.sys``, ``np.ctypeslib``, ``torch.hub``): an
   allowlist of every torch and numpy attribute is not practical.

**What it touches.** A construct outside the rule in cell k can touch every exercise whose test cell runs
after cell k (it may bind any name, or run code, before the test): each of those tests gets no credit, with
a one-line reason naming the cell, its line and the construct. A test cell above cell k is untouched.

Modules allowed, and why: torch, numpy and math (the course's arithmetic), lmpolicy (the course's own
library; its answers are not in the grading kernel: ``isolation.library_view``), matplotlib (plots),
functools, itertools, collections, typing, dataclasses, random, statistics, time, copy, enum, abc,
numbers, fractions, decimal, heapq, bisect, textwrap, re, warnings, contextlib (plain helpers, none of which
reaches the interpreter's namespaces). ``operator`` is not: ``attrgetter`` and ``methodcaller`` take an
attribute's name as a computed string, the ``getattr`` the rule refuses; nor is ``string``, whose
``Formatter.get_field`` does the same.

What runs code from a string is refused wherever it hides: ``getattr`` is allowed only called with a constant
name (never passed as a value: ``functools.reduce(getattr, ...)``), a string may hold no dunder name outside
``ALLOWED_DUNDER_STRINGS`` (``"{0.__globals__}"``), an annotation may not be a string (``typing.get_type_hints``
and ``functools.singledispatch`` evaluate it), and no private name (``checks._ipython``, ``[dataclasses][0]._create_fn``,
``self._cache``) is read, whatever it is read from: the course's own library holds the shell there, and the standard
library's private helpers run code from strings (``dataclasses._create_fn``).
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import re
import symtable
from dataclasses import dataclass

from lmpolicy.notebook import catalogue

# -- the allowlists ----------------------------------------------------------------------------------------

ALLOWED_NODES = frozenset({
    ast.Module, ast.Expr, ast.Pass, ast.Break, ast.Continue, ast.Return, ast.Raise, ast.Assert,
    ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete,
    ast.For, ast.While, ast.If, ast.With, ast.Try, ast.ExceptHandler, ast.Import, ast.ImportFrom, ast.alias,
    ast.Global, ast.Nonlocal,  # judged by rule 1 when they name a tested name
    ast.Match, ast.match_case, ast.MatchValue, ast.MatchSingleton, ast.MatchSequence, ast.MatchMapping,
    ast.MatchClass, ast.MatchStar, ast.MatchAs, ast.MatchOr,  # captures judged by rule 1
    ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict, ast.Set, ast.ListComp,
    ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension, ast.Yield, ast.YieldFrom, ast.Compare,
    ast.Call, ast.keyword, ast.FormattedValue, ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript,
    ast.Starred, ast.Name, ast.List, ast.Tuple, ast.Slice, ast.arguments, ast.arg, ast.withitem,
    ast.Load, ast.Store, ast.Del,
    ast.And, ast.Or, ast.Add, ast.Sub, ast.Mult, ast.MatMult, ast.Div, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
    ast.BitOr, ast.BitXor, ast.BitAnd, ast.FloorDiv, ast.Invert, ast.Not, ast.UAdd, ast.USub, ast.Eq, ast.NotEq,
    ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot, ast.In, ast.NotIn,
})
# What a refused node kind is, in words (any other: its class name).
NODE_WORDS = {ast.AsyncFunctionDef: "an async def", ast.Await: "await", ast.AsyncFor: "an async for",
              ast.AsyncWith: "an async with", ast.TryStar: "except*"}

# A module may be imported when it or a package above it is listed (``torch`` allows ``torch.nn.functional``).
ALLOWED_MODULES = frozenset({
    "torch", "numpy", "math", "lmpolicy", "matplotlib", "functools", "itertools", "collections", "typing",
    "dataclasses", "random", "statistics", "time", "copy", "enum", "abc", "numbers", "fractions", "decimal",
    "heapq", "bisect", "textwrap", "re", "warnings", "contextlib", "__future__",
})

ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod",
    "complex", "dict", "dir", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hasattr", "getattr",
    "hash", "hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min",
    "next", "object", "oct", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set",
    "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "zip", "display",
    "NotImplemented", "Ellipsis", "True", "False", "None",
})  # and every exception and warning class (``_is_exception_class``); getattr only with a constant name

# Dunder names a cell may read (``if __name__ == "__main__":``) and dunder attributes it may use or define.
ALLOWED_DUNDERS = frozenset({
    "__name__", "__doc__", "__qualname__", "__version__", "__class__", "__init__", "__call__", "__repr__",
    "__str__", "__len__", "__getitem__", "__setitem__", "__contains__", "__iter__", "__next__", "__eq__",
    "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__bool__", "__add__", "__sub__", "__mul__",
    "__truediv__", "__neg__", "__post_init__", "__enter__", "__exit__", "__future__",
})
# The methods a class may define beyond those: protocols that run only when their object is used (none that runs
# on its own at class creation, attribute lookup or collection: __set_name__, __init_subclass__, __getattr__,
# __del__ are refused).
ALLOWED_DUNDER_METHODS = ALLOWED_DUNDERS | {
    "__new__", "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__floordiv__", "__mod__", "__pow__",
    "__matmul__", "__pos__", "__abs__", "__float__", "__int__", "__index__", "__round__", "__array__",
    "__reversed__", "__delitem__", "__format__", "__copy__", "__deepcopy__",
}
# Dunder strings a cell may hold: the names above, and the "__main__" of ``if __name__ == "__main__":``.
ALLOWED_DUNDER_STRINGS = ALLOWED_DUNDER_METHODS | {"__main__"}

# Attribute names under which an allowed module hands out the interpreter or runs code it loads (the refused
# modules, reached as attributes: ``typing.sys``, ``lmpolicy.notebook.checks.os``; and the loaders of code and pickles).
REFUSED_MODULES = frozenset({
    "sys", "os", "builtins", "__main__", "importlib", "inspect", "types", "ctypes", "ctypeslib", "pickle",
    "marshal", "gc", "runpy", "code", "codeop", "threading", "_thread", "multiprocessing", "asyncio",
    "concurrent", "signal", "atexit", "subprocess", "IPython", "ipykernel", "operator", "dill", "cloudpickle",
    "shelve", "weakref", "posix", "io", "pathlib", "shutil", "socket", "tempfile",
})
INTERPRETER_HANDLES = REFUSED_MODULES | {
    "modules", "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "gi_frame", "cr_frame", "tb_frame",
    "_getframe", "currentframe", "user_ns", "user_global_ns", "run_cell", "run_line_magic", "run_cell_magic",
    "system", "getoutput", "events", "get_ipython", "load", "loads", "load_library", "load_inline",
    "cpp_extension", "hub", "globals", "locals", "setattr", "delattr", "get_type_hints", "ForwardRef",
    "package", "PackageImporter", "f2py", "read_array", "push", "user_module", "run_code", "ex", "ev",
    "safe_execfile", "magic", "register_magic_function",
    "fork", "spawn", "Thread", "Timer", "Process", "settrace", "setprofile", "addaudithook", "excepthook",
}

# IPython's history of inputs and outputs (Out[3] may hold anything an earlier cell showed), read by name.
IPYTHON_HISTORY = re.compile(r"In|Out|_oh|_ih|_dh|_+|_i+|_\d+|_i\d+")


STRING_ANNOTATION = "a string annotation (typing evaluates it as code)"


def _string_in(annotation) -> bool:
    return annotation is not None and any(isinstance(part, ast.Constant) and isinstance(part.value, str)
                                          for part in ast.walk(annotation))


_DUNDER_IN_TEXT = re.compile(r"__[A-Za-z]\w*?__")


def _is_exception_class(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _module_allowed(module: str) -> bool:
    parts = module.split(".")
    return any(".".join(parts[:n]) in ALLOWED_MODULES for n in range(1, len(parts) + 1))


# -- the cells ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """A submitted code cell: its index in the notebook, its source, the exercise it answers (None if it is no
    answer cell) and, for the student's view, the exercise above it (``below``: its label)."""
    index: int
    source: str
    exercise: str | None = None
    below: str | None = None

    @property
    def where(self) -> str:
        """The cell as a student finds it: its place in the notebook (text cells counted), and what it answers
        (or, when the student's view knows it, the exercise above it)."""
        try:
            exercise = catalogue.label(self.exercise) if self.exercise else None
        except ValueError:  # a key of no known form (another course's): the key itself
            exercise = self.exercise
        if exercise:
            return f"cell {self.index + 1} (your answer to {exercise})"
        return f"cell {self.index + 1}" + (f" (below {self.below})" if self.below else "")

    def line(self, number: int) -> str:
        """Line ``number`` (1-based) of the source, stripped."""
        return (self.source.splitlines()[number - 1:number] or [""])[0].strip()


NOT_PARSED = "not plain Python"  # how a finding's construct begins when the cell does not parse


@dataclass(frozen=True)
class Outside:
    """One thing outside the rule: the cell and line it is on, the construct in words, the grader's one-line
    reason (the feedback's), what the student can do about it, and the tested name it binds (rule 1) if any."""
    cell: Cell
    line: int
    construct: str
    reason: str
    advice: str
    binds: str | None = None

    def student_line(self, where: str | None = None) -> str:
        """The line a student reads before hand-in (Validate, a check cell): ``where`` the cell is (default:
        its place in the notebook), its line, the code, what is outside, and what to do."""
        quote = self.cell.line(self.line)
        quote = quote if len(quote) <= 60 else quote[:57] + "..."
        said = f"{where or self.cell.where}, line {self.line}: `{quote}`"
        if self.binds:
            return f"{said} {self.construct}: the check of {self.binds} would get no credit; {self.advice}"
        if self.construct.startswith(NOT_PARSED):
            said += f" is {self.construct} the grader can check" if self.construct == NOT_PARSED else \
                f" is {self.construct}, which the grader cannot check"
        else:
            said_already = self.construct.startswith(("import ", "from ")) and quote.startswith(self.construct)
            said += ("" if said_already else f" uses {self.construct}, which") + \
                " is outside the plain Python the grader can check"
        return f"{said}: every exercise below it would get no credit; {self.advice}"


# What a student can do about the common honest habits outside the rule (the first that matches the line).
SHELL_IMPORTS = ("os", "sys", "pathlib", "glob", "shutil", "subprocess", "io", "tempfile", "socket")


def advice(construct: str, line: str) -> str:
    """What to do about ``construct`` (the rule's words) found on ``line`` (the code), in a few friendly words."""
    text = line.strip()
    if construct == NOT_PARSED:  # an IPython magic, shell escape or help line
        if text.startswith("%matplotlib"):
            return "delete the line (plots show without it)"
        if text.lstrip("%!").startswith(("pip", "conda")):
            return "delete the line: the course's packages are installed already (install others in a terminal)"
        if text.startswith("!"):
            return "delete the line: run shell commands in a terminal, not in the notebook"
        if text.startswith(("%time ", "%timeit ", "%%time", "%%timeit")):
            return "delete the magic and keep the code (time.perf_counter() times a step in plain Python)"
        if text.endswith("?"):
            return "delete the line (Shift+Tab on a name shows its help)"
        return "delete the line: IPython's magics are not plain Python (the cell runs without it)"
    if construct.startswith(NOT_PARSED):
        return "fix it, or delete the cell if it was a scratch (a cell that does not run costs the same)"
    if construct == "help":
        return "delete it (Shift+Tab on a name shows its help)"
    if construct == "open":
        return "delete it: no exercise reads or writes files"
    if construct == STRING_ANNOTATION:
        return "write the annotation without quotes (x: torch.Tensor) or leave it out"
    if "private name" in construct or re.fullmatch(r"(getattr|hasattr)\(\.\.\., '_\w*'\)", construct):
        return "name it without the leading underscore (self.cache), or use the module's public name"
    if construct.startswith("a relative import"):
        return "put that code in the notebook itself: only the notebook is graded"
    imported = re.match(r"(?:from|import) ([\w.]+)", construct)
    if imported:
        module = imported.group(1).split(".")[0]
        if module == "IPython" and "display" in text:
            return "delete it: display(...) works without an import"
        if module == "tqdm":
            return "delete it: print the progress every so many steps instead"
        if module in SHELL_IMPORTS:
            return "delete it: no exercise needs files, paths or the interpreter"
        return ("delete it: a notebook may import torch, numpy, math, matplotlib, lmpolicy and Python's plain helpers "
                "(functools, itertools, collections, ...) only")
    return "take it out of your notebook"


@functools.lru_cache(maxsize=1024)  # each test reads every cell above it again; the trees are only read
def _parsed(cell: Cell) -> tuple[ast.Module | None, Outside | None]:
    """The cell's syntax tree, or why it has none (it is not plain Python)."""
    try:
        return ast.parse(cell.source), None
    except SyntaxError as error:
        line = min(max(error.lineno or 1, 1), max(len(cell.source.splitlines()), 1))
        text = cell.line(line)
        what = ("an IPython magic or shell line" if text.startswith(("%", "!")) or text.endswith("?")
                else f"not plain Python ({error.msg})")
        construct = NOT_PARSED if what.startswith("an IPython") else what
        help_ = advice(construct, text)
        return None, Outside(cell, line, construct, f"{cell.where} line {line} is {what}: no exercise checked below it "
                             f"gets credit; {help_}", help_)
    except (ValueError, RecursionError, MemoryError) as error:
        what = f"{NOT_PARSED} ({type(error).__name__})"
        return None, Outside(cell, 1, what, f"{cell.where} is {what}", advice(what, ""))


def _quoted(cell: Cell, node) -> str:
    """A short quote of ``node``'s code, for the reason."""
    text = " ".join((ast.get_source_segment(cell.source, node) or "").split())
    return text if len(text) <= 60 else text[:57] + "..."


def _refused(node, imported: set[str], called: set[int]) -> str | None:
    """What in ``node`` itself is outside the allowlist, in words (``imported``: the names bound by imports;
    ``called``: the ids of the getattr and hasattr names that are called, with a constant name)."""
    kind = type(node)
    if kind not in ALLOWED_NODES:
        return NODE_WORDS.get(kind, f"a {kind.__name__} construct")
    if isinstance(node, ast.Import):
        for alias in node.names:
            if not _module_allowed(alias.name):
                return f"import {alias.name}"
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            return "a relative import (a module of your own folder)"
        if not _module_allowed(node.module or ""):
            return f"from {node.module} import"
        for alias in node.names:
            if alias.name == "*" or alias.name in INTERPRETER_HANDLES or alias.name.startswith("_"):
                return f"from {node.module} import {alias.name}"
    elif isinstance(node, ast.Name):
        name = node.id
        if name in ("getattr", "hasattr") and id(node) not in called:
            return f"{name} passed as a value (it may get a computed name)"
        if _is_dunder(name) and name not in ALLOWED_DUNDERS:
            return name
        if isinstance(node.ctx, ast.Load) and IPYTHON_HISTORY.fullmatch(name):
            return f"IPython's history ({name})"
        if (name in dir(builtins) or name in ("get_ipython", "exit", "quit")) and name not in ALLOWED_BUILTINS \
                and name not in ALLOWED_DUNDERS and not _is_exception_class(name):
            return name
    elif isinstance(node, ast.Attribute):
        if (_is_dunder(node.attr) and node.attr not in ALLOWED_DUNDERS) or node.attr in INTERPRETER_HANDLES:
            return f".{node.attr}"
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            # no attribute of anything: a module held in a list or reached by a dotted path is one too, and what
            # the grader's code in the submission's process relies on stays as it was imported
            base = node.value.id if isinstance(node.value, ast.Name) else None
            change = "deleting" if isinstance(node.ctx, ast.Del) else "an assignment to"
            return f"{change} {ast.unparse(node)}, an attribute " + (
                "of a module" if base in imported else "(a cell may assign names, not attributes)")
        if node.attr.startswith("_") and not _is_dunder(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            # whatever it is read from: a module reached as a value ([dataclasses][0]) is one too
            return f".{node.attr}, a private name" + (" of a module" if isinstance(root, ast.Name)
                                                      and root.id in imported else "")
    elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        if _is_dunder(node.name) and node.name not in ALLOWED_DUNDER_METHODS:
            return f"a method {node.name}"
        if isinstance(node, ast.FunctionDef) and _string_in(node.returns):
            return STRING_ANNOTATION
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
        name = node.args[1] if len(node.args) >= 2 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return f"{node.func.id} with a computed name"
        if name.value in INTERPRETER_HANDLES or (name.value.startswith("_") and not _is_dunder(name.value)):
            return f"{node.func.id}(..., {name.value!r})"
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        for dunder in _DUNDER_IN_TEXT.findall(node.value):
            if dunder not in ALLOWED_DUNDER_STRINGS:
                return f"the name {dunder!r} in a string"
    elif isinstance(node, (ast.arg, ast.AnnAssign)) and _string_in(node.annotation):
        return STRING_ANNOTATION
    return None


def _imported(cells: list[Cell]) -> set[str]:
    """The names the imports of ``cells`` bind: the modules (and what was imported from them) of the notebook."""
    found = set()
    for cell in cells:
        tree, _ = _parsed(cell)
        found |= {(a.asname or a.name).split(".")[0] for node in ast.walk(tree or ast.Module(body=[]))
                  if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    return found


def constructs_outside(cell: Cell, tested: set[str] = frozenset(),
                       imported: set[str] | None = None) -> list[Outside]:
    """Each statement of ``cell`` holding something outside the allowed constructs (its first such thing), or the
    one reason it does not parse. When the statement names a tested name (``globals().update(softmax=...)``),
    the finding says that it binds that name. ``imported``: the names the notebook's imports bind (this cell's
    own, if not given)."""
    tree, unparsed = _parsed(cell)
    if tree is None:
        return [unparsed]
    imported = _imported([cell]) if imported is None else imported
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")}
    found = []
    for statement in tree.body:
        for node in ast.walk(statement):
            refused = _refused(node, imported, called)
            if refused is None:
                continue
            line = getattr(node, "lineno", statement.lineno)
            named = sorted(tested & _names_in(statement))
            quote = _quoted(cell, statement)
            help_ = advice(refused, cell.line(line))
            if named:  # what the test's feedback says: how its own name was made
                reason = (f"{cell.where} line {line} binds {named[0]} with {quote} ({refused}): the grader only "
                          f"credits a {named[0]} made by a plain def or assignment in its answer cell")
            else:
                reason = (f"{cell.where} line {line} uses {refused} ({quote}), outside the plain Python the grader "
                          f"can check: no exercise checked below it gets credit; {help_}")
            found.append(Outside(cell, line, refused, reason, help_))
            break
    return found


def outside_construct(cell: Cell, tested: set[str] = frozenset(), imported: set[str] | None = None) -> str | None:
    """The first thing in ``cell`` outside the allowed constructs, as the grader's reason says it, or None: the
    cell, the line and the construct."""
    found = constructs_outside(cell, tested, imported)
    return found[0].reason if found else None


def _names_in(statement) -> set[str]:
    """Every identifier a statement mentions: names, attributes, keywords and identifier strings."""
    found = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            found.add(node.value)
    return found


# -- rule 1: how a tested name is made ---------------------------------------------------------------------


def tested_names(test_source: str, trusted: set[str]) -> set[str]:
    """The names test cell ``test_source`` takes from the submission: the global names it reads (its
    functions' included) that neither it binds nor the trusted kernel holds (``trusted``) nor builtins."""
    try:
        table = symtable.symtable(test_source, "test cell", "exec")
    except SyntaxError:
        return set()
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    read = set()

    def visit(scope, top):
        for symbol in scope.get_symbols():
            if symbol.is_referenced() and (symbol.is_global() if not top else True):
                read.add(symbol.get_name())
        for child in scope.get_children():
            visit(child, False)
    visit(table, True)
    return read - bound - trusted - set(dir(builtins)) - {"get_ipython", "display"}


def _targets(target):
    """The names an assignment target binds, and whether it is one plain name."""
    if isinstance(target, ast.Name):
        yield target.id, target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _targets(element)
    elif isinstance(target, ast.Starred):
        yield from _targets(target.value)


def _is_plain(statement, name: str) -> bool:
    """A plain making of ``name``: an undecorated def, or ``name = expr`` / ``name: type = expr``."""
    if isinstance(statement, ast.FunctionDef):
        return statement.name == name and not statement.decorator_list
    if isinstance(statement, ast.Assign):
        return all(isinstance(t, ast.Name) for t in statement.targets)
    if isinstance(statement, ast.AnnAssign):
        return isinstance(statement.target, ast.Name) and statement.simple and statement.value is not None
    return False


def _bindings(statement, top: bool = True):
    """(name, line, how) for each global name ``statement`` (a top-level statement of a cell) binds or
    declares global: its own targets, and what any nested code binds at the top level (a ``:=`` outside a
    function, a ``global`` or ``nonlocal`` declaration in one)."""
    how = type(statement).__name__
    words = {"FunctionDef": "a def", "ClassDef": "a class", "Import": "an import", "ImportFrom": "an import",
             "For": "a for loop", "While": "a while loop", "With": "a with statement", "Try": "a try block",
             "If": "an if block", "Delete": "del", "AugAssign": "an augmented assignment",
             "Assign": "an assignment", "AnnAssign": "an annotated assignment", "Match": "a match statement"}
    described = words.get(how, how)
    if isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
        if statement.decorator_list:
            described = f"a decorated {'def' if isinstance(statement, ast.FunctionDef) else 'class'}"
        yield statement.name, statement.lineno, described
        # its body binds its own names; a global declaration in it, or a := in what runs at the def (its
        # decorators, defaults, annotations, bases), binds the module's
        yield from _nested_bindings(statement, described)
        return
    elif isinstance(statement, (ast.Import, ast.ImportFrom)):
        for alias in statement.names:
            yield (alias.asname or alias.name).split(".")[0], statement.lineno, described
    elif isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete, ast.For)):
        targets = (statement.targets if isinstance(statement, (ast.Assign, ast.Delete)) else [statement.target])
        for target in targets:
            unpacked = not isinstance(target, ast.Name)
            for name, node in _targets(target):
                yield name, node.lineno, (f"{described} unpacking into it" if unpacked and described != "del"
                                          else described)
    # what nested statements and expressions bind at the top level
    for child in ast.iter_child_nodes(statement):
        yield from _nested_bindings(child, described)


def _nested_bindings(node, enclosing: str):
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        for name in node.names:
            yield name, node.lineno, f"a {'global' if isinstance(node, ast.Global) else 'nonlocal'} statement"
        return
    if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
        for inner in ast.walk(node):  # its own names are its own, but a global declaration binds the module's
            if isinstance(inner, (ast.Global, ast.Nonlocal)):
                yield from _nested_bindings(inner, enclosing)
        run_at_definition = [*getattr(node, "decorator_list", []), *getattr(node, "bases", []),
                             *getattr(node, "keywords", [])]
        if not isinstance(node, ast.ClassDef):
            run_at_definition += [*node.args.defaults, *node.args.kw_defaults]
        for part in run_at_definition:
            for inner in ast.walk(part) if part is not None else ():
                if isinstance(inner, ast.NamedExpr) and isinstance(inner.target, ast.Name):
                    yield inner.target.id, inner.lineno, "a := expression"
        return
    if isinstance(node, ast.stmt):  # inside an if, for, while, try or with block of the top level
        for name, line, how in _bindings(node, top=False):
            yield name, line, f"{how} inside {enclosing}" if not how.endswith(f"inside {enclosing}") else how
        return
    if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
        yield node.target.id, node.lineno, "a := expression"
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        for name, target in _targets(node.optional_vars):
            yield name, target.lineno, "a with ... as target"
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name, node.lineno, "an except ... as target"
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name, node.lineno, "a match capture"
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest, node.lineno, "a match capture"
    elif isinstance(node, ast.comprehension):
        # a comprehension's own target is its own; a := inside it binds the top level
        for inner in ast.walk(node):
            if isinstance(inner, ast.NamedExpr) and isinstance(inner.target, ast.Name):
                yield inner.target.id, inner.lineno, "a := expression"
        return
    for child in ast.iter_child_nodes(node):
        yield from _nested_bindings(child, enclosing)


def _plain_makings(cell: Cell, tested: set[str]) -> set[str]:
    """The names of ``tested`` that ``cell`` makes plainly at its top level."""
    tree, _ = _parsed(cell)
    if tree is None:
        return set()
    return {name for statement in tree.body for name, line, how in _bindings(statement)
            if name in tested and line == statement.lineno and _is_plain(statement, name)
            and how in ("a def", "an assignment", "an annotated assignment")}


def making_outside(cell: Cell, tested: set[str], exercise: str | None, remade_below: set[str] = frozenset(),
                   answered: bool = True) -> Outside | None:
    """The first binding in ``cell`` of a name of ``tested`` that is not a plain making of it at the top
    level of an answer cell of ``exercise``, or None. A plain making in another
    cell is let through for the names of ``remade_below``, which an answer cell below it makes again
    (an earlier attempt left in the notebook: the answer cell's making replaces it), and in any cell when
    no cell above the test answers ``exercise`` (``answered`` false: its answer cell deleted, which the
    grader does not restore, or a notebook without answer cells)."""
    tree, _ = _parsed(cell)
    if tree is None or not tested:
        return None
    for statement in tree.body:
        for name, line, how in _bindings(statement):
            if name not in tested:
                continue
            plain = line == statement.lineno and _is_plain(statement, name) and \
                how in ("a def", "an assignment", "an annotated assignment")
            if plain and (not answered or cell.exercise == exercise or name in remade_below):
                continue
            if how == "an import":  # the library's own answer, most often: the words of the check it skips
                return Outside(cell, line, f"imports {name}",
                               f"{cell.where} line {line} imports {name}, which gets no credit: implement this "
                               f"yourself, with a plain def of {name} in its answer cell",
                               f"implement it yourself, with a plain def of {name} in its answer cell", name)
            where = "" if cell.exercise == exercise or not answered else " outside its answer cell"
            return Outside(cell, line, f"binds {name} with {how}{where}",
                           f"{cell.where} line {line} binds {name} with {how}{where}: the grader only credits a {name} "
                           f"made by a plain def or assignment ({name} = ...) at the top level of its answer cell",
                           f"make {name} only with a plain def or assignment ({name} = ...) at the top level of its "
                           "answer cell", name)
    return None


def outside_making(cell: Cell, tested: set[str], exercise: str | None, remade_below: set[str] = frozenset(),
                   answered: bool = True) -> str | None:
    """``making_outside``'s finding as the grader's reason, or None."""
    found = making_outside(cell, tested, exercise, remade_below, answered)
    return found.reason if found else None


def first_outside(cells: list[Cell], test_source: str, exercise: str | None, trusted: set[str]) -> Outside | None:
    """Why the test cell ``test_source`` of ``exercise`` gets no credit under the code rule, or None: the
    first cell of ``cells`` (the submitted code cells above it, in order) holding a construct outside the
    allowlist or a binding of a tested name that is not a plain one in its answer cell."""
    tested = tested_names(test_source, trusted)
    remade_below: set[str] = set()  # for each cell, from the last: the names an answer cell below it makes plainly
    remade_after = []
    for cell in reversed(cells):
        remade_after.append(set(remade_below))
        if cell.exercise == exercise and exercise is not None:
            remade_below |= _plain_makings(cell, tested)
    answered = exercise is not None and any(cell.exercise == exercise for cell in cells)
    imported = _imported(cells)
    for cell, remade in zip(cells, reversed(remade_after)):
        found = constructs_outside(cell, tested, imported)
        found = found[0] if found else making_outside(cell, tested, exercise, remade, answered)
        if found:
            return found
    return None


def outside_the_rule(cells: list[Cell], test_source: str, exercise: str | None, trusted: set[str]) -> str | None:
    """``first_outside`` as the grader's one-line reason (the test's verdict in the feedback), or None."""
    found = first_outside(cells, test_source, exercise, trusted)
    return found.reason if found else None


# -- the student's view: the same judgement before hand-in ---------------------------------------------------

# What the trusted kernel holds before any cell of a notebook runs (IPython's names); a test reads them freely.
KERNEL_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "_", "__", "___", "display"})


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _is_test(cell) -> bool:
    """A test (check) cell: graded code that is no answer (nbgrader's metadata; the grader's ``cells.is_test``)."""
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _trusted_after(source: str) -> set[str]:
    """The names a cell the trusted kernel runs itself (a test, a locked set-up cell) binds there."""
    try:
        return {s.get_name() for s in symtable.symtable(source, "cell", "exec").get_symbols()
                if s.is_assigned() or s.is_imported()}
    except SyntaxError:
        return set()


def notebook_judgement(nb) -> tuple[list[Cell], dict[str, Outside | None]]:
    """A notebook as the grader judges it: its submitted code cells (every code cell but the tests, each with
    the exercise it answers and the one above it) and, for each test cell's grade id, ``first_outside`` as
    the trusted kernel finds it when that test runs (the names the locked set-up cells and the tests above
    bind are the trusted kernel's own)."""
    cells, judged, trusted, below = [], {}, set(KERNEL_NAMES), None
    for index, cell in enumerate(nb.cells):
        meta = _nbgrader(cell)
        key = catalogue.exercise_key(meta["grade_id"]) if meta.get("grade_id") else None
        if cell.get("cell_type") == "code" and _is_test(cell):
            judged[meta["grade_id"]] = first_outside(cells, cell.source, key, trusted)
            trusted |= _trusted_after(cell.source)
        elif cell.get("cell_type") == "code":
            if meta.get("locked") and not meta.get("solution"):
                trusted |= _trusted_after(cell.source)
            cells.append(Cell(index, cell.source, key if meta.get("solution") else None, below))
        if key and (meta.get("solution") or meta.get("grade")):
            with contextlib.suppress(ValueError):  # a key of no known form: no exercise to name cells by
                below = catalogue.label(key)
    return cells, judged


def notebook_outside(nb) -> list[Outside]:
    """Everything in notebook ``nb`` outside the rule, in the order of the notebook, each once: every statement
    of a submitted code cell outside the allowed constructs, and every making of a tested name the grader
    would refuse at a test below it."""
    cells, judged = notebook_judgement(nb)
    imported = _imported(cells)
    found = {(o.cell.index, o.line): o for cell in cells for o in constructs_outside(cell, imported=imported)}
    for outside in judged.values():
        if outside is not None:
            found.setdefault((outside.cell.index, outside.line), outside)
    return [found[place] for place in sorted(found)]


def first_outside_in_history(history: list[tuple[int, str]]) -> tuple[Outside, int] | None:
    """The first construct outside the rule among the cells a kernel ran (``history``: (execution count,
    source) in order; the check cells left out by the caller), and how many other cells are outside too; or None.
    The finding's cell index is the execution count."""
    cells = [Cell(count, source) for count, source in history if source.strip()]
    imported = _imported(cells)
    found = [o for cell in cells for o in constructs_outside(cell, imported=imported)[:1]]
    if not found:
        return None
    return found[0], len({o.cell.source for o in found[1:]} - {found[0].cell.source})
