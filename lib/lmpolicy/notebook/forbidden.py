"""What an exercise's shortcuts are, and what blocks them while the exercise is checked.

Each exercise declares its shortcuts once, in its notebook's module of ``lmpolicy.exercises`` (a ``Shortcuts``: the
library functions, torch names and name pattern that compute its quantity), and everything that enforces them
reads that declaration:

* its checks call the student's code inside ``blocked(shortcuts)`` (``Exercise.call``): the library functions
  and torch's public ones are blocked in the process that runs the check, the student's own for the visible checks,
  the trusted kernel for the hidden tests;
* the trusted no-credit rule (``lmpolicy_grader.trusted_tests.channel``) reads ``active_names()``, the names and
  name patterns of the shortcuts blocked now, and refuses credit to a submission whose source reaches one of them
  (``torch._softmax`` and ``torch.ops.aten._softmax`` by the pattern);
* the grader's view of the library (``lmpolicy_grader.isolation.library_view``, through
  ``lmpolicy.exercises.registry``) leaves every declared library function of a notebook's exercises out of that
  notebook's grading kernel, and every declared module (the per-student answer key) out of every grading kernel.

It lives in the student library because the visible checks, which run on the student's machine, use it; it names
shortcuts and holds no answer.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import re
from dataclasses import dataclass

from lmpolicy.notebook.blocking import no_library_shortcut, refusing_operators

TEMPERATURE = "lmpolicy.exact.temperature"
TILTING = "lmpolicy.exact.tilting"
KL = "lmpolicy.exact.kl"
GENERATE = "lmpolicy.tinylm.generate"
LOGPROBS = "lmpolicy.tinylm.logprobs"
REINFORCE = "lmpolicy.tinylm.reinforce"
KL_PLACEMENT = "lmpolicy.tinylm.kl_placement"
ANSWER_KEY = "lmpolicy.per_student.variant_answers"  # the per-student answers: with the grader, never in a grading kernel


@dataclass(frozen=True)
class Shortcuts:
    """One exercise's shortcuts.

    ``library``: ``"module:qualname"`` of the student library's functions that compute the exercise's
    quantity, or a bare ``"module"`` for a whole module (the answer key). ``torch``: dotted paths of torch's
    public callables that do (blocked in-process by ``shortcuts``). ``pattern``: a regular expression that a
    whole name matches (``re.fullmatch``, as the no-credit rule reads it: ``.*softmax.*`` for ``_softmax``),
    for the names torch has public and private (``torch._softmax``, ``torch.special.softmax``,
    ``torch._C._nn...``, ``torch.ops.aten._softmax``). ``parts``: ``"module:qualname"`` of library functions
    the notebook gives its students for other uses, which compute a part of the quantity and not the quantity itself
    (``kl`` for Lab Task 4's ``kl_objective``): the exercise's rule refuses them by name, the grading kernel
    keeps them. ``operators``: a regular expression that the name of a torch operator computing the quantity
    fullmatches (``aten::_softmax``), with ``computes``, the quantity in words: whatever name the student's
    code reached it by, the operator refuses while the student's code is checked (``blocking.refusing_operators``),
    in the student's kernel for the visible checks and in the submission's process for the hidden tests.
    """

    library: tuple[str, ...] = ()
    torch: tuple[str, ...] = ()
    pattern: str | None = None
    parts: tuple[str, ...] = ()
    operators: str | None = None
    computes: str = ""


# any softmax or softmin, and the distributions built on one: every distribution of torch.distributions made from
# logits normalises them with one (Categorical, Multinomial, RelaxedOneHotCategorical, their utils' logits_to_probs)
SOFTMAX_NAMES = r"(?i).*soft_?m(ax|in).*|(OneHot)?Categorical|distributions"
# torch's softmax operators, which every path to a softmax in torch runs: a softmin is one on -x; attention, the
# cross-entropy loss and the distributions run one (aten::_safe_softmax, aten::_log_softmax, aten::_softmax)
SOFTMAX_OPERATORS = r"aten::.*soft_?m(ax|in).*"

def _library_object(name: str):
    """``"module:qualname"`` as the object it names."""
    module, qualname = name.split(":")
    target = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _torch_object(path: str):
    """A dotted torch path (``torch.nn.functional.softmax``, ``torch.Tensor.softmax``) as its object: the
    longest importable prefix is the module, the rest attributes."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            target = getattr(target, part)
        return target
    raise ImportError(f"forbidden: {path} names nothing importable")


def callables(declared: Shortcuts) -> tuple:
    """The declared library functions and torch callables, as objects (for ``blocking.no_library_shortcut``).
    A whole module is not a callable: it is left out of grading kernels."""
    return (*(_library_object(name) for name in (*declared.library, *declared.parts) if ":" in name),
            *(_torch_object(path) for path in declared.torch))


def names(declared: Shortcuts) -> set:
    """What the trusted no-credit rule matches in the submission's source: the leaf name of every declared
    function (strings) and the declared pattern (a compiled ``re.Pattern``)."""
    found: set = {name.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for name in (*declared.library, *declared.parts)}
    found |= {name.rsplit(".", 1)[-1] for name in declared.torch}
    if declared.pattern:
        found.add(re.compile(declared.pattern))
    return found


def matches(declared: Shortcuts, name: str) -> bool:
    """Whether ``name`` (a leaf name) is one of the declared shortcuts, by name or by pattern."""
    return any(name == entry if isinstance(entry, str) else bool(entry.fullmatch(name))
               for entry in names(declared))


_ACTIVE: list[Shortcuts] = []  # the shortcuts active now, innermost last


@contextlib.contextmanager
def blocked(declared: Shortcuts):
    """While active, ``declared`` earns nothing: its library functions and torch's public ones raise
    LibraryShortcutUsed in this process (``blocking.no_library_shortcut``), and the trusted rule refuses a
    submission whose source reaches any of its names or pattern (``active_names``)."""
    _ACTIVE.append(declared)
    try:
        with no_library_shortcut(*callables(declared)), contextlib.ExitStack() as operators:
            if declared.operators:
                operators.enter_context(refusing_operators(declared.operators, declared.computes))
            yield
    finally:
        _ACTIVE.pop()


def active_names() -> set:
    """The names and patterns of every declaration active now (empty when none is)."""
    return set().union(*(names(declared) for declared in _ACTIVE))


def active_operators() -> list[tuple[str, str]]:
    """The operator patterns of every declaration active now, each with what it computes (for the grader to refuse
    them in the submission's process, where the hidden tests call the student's code)."""
    return [(declared.operators, declared.computes) for declared in _ACTIVE if declared.operators]


def _outside_names(sources) -> set[str]:
    """The names ``sources`` take from outside themselves: attribute names and imported names, and names read
    that the sources never bind (a helper the submission writes itself, ``def stable_softmax``, is its own code,
    which the rule follows anyway). Cells that do not parse give none."""
    read, bound = set(), set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.Attribute):
                read.add(node.attr)
            elif isinstance(node, ast.alias):
                read.add(node.name.split(".")[-1])
    return read - bound


def rule_names(sources) -> set:
    """What the trusted no-credit rule refuses now: ``active_names()``, and every name in the submission's
    ``sources`` that one of their patterns matches, as a plain name (``_softmax`` of ``torch._softmax``), so
    that a rule comparing names sees a private torch name for the shortcut it is."""
    declared = active_names()
    patterns = [entry for entry in declared if not isinstance(entry, str)]
    return declared | {name for name in _outside_names(sources) if any(p.fullmatch(name) for p in patterns)}
