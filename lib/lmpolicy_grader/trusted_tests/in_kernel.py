"""What the trusted test kernel runs for the grader, called by name over a comm (``kernels.remote_call``).

Loaded as an IPython extension when the trusted kernel starts, it serves four operations:
``connect`` (open the channel to the submission's kernel), ``outside_the_rule`` (before a test cell: why
the code rule, ``lmpolicy.notebook.code_rule``, gives it no credit, read from the submitted source), ``bind`` (before a test
cell: the submission's current names into this kernel's namespace, never over a name the trusted cells
defined) and ``failed_line`` (the line of the last cell that raised).
"""
from __future__ import annotations

import re
import sys

from IPython import get_ipython

from lmpolicy.notebook import checks, code_rule
from lmpolicy.notebook.name_advice import renamed_advice
from lmpolicy_grader.kernels import remote_call
from lmpolicy_grader.kernels.trusted_kernel import IN_KERNEL_TARGET
from lmpolicy_grader.trusted_tests import no_credit
from lmpolicy_grader.trusted_tests.channel import Channel
from lmpolicy_grader.trusted_tests.errors import ChannelError

TARGET = IN_KERNEL_TARGET

_ALL_SOURCES: list[tuple[int, str]] = []
_ANSWERS: dict[int, str] = {}  # answer cell index -> the exercise it answers
_CHANNEL: Channel | None = None
_INJECTED: dict[str, object] = {}


def connect(info: dict, sources: list[tuple[int, str]], cell_seconds: float,
            answers: list[tuple[int, str]] = ()) -> str | None:
    """Open the channel to the submission's kernel; ``sources`` are its notebook's non-test code
    cells as (index, source), from the notebook the grader holds, ``answers`` its answer cells as
    (index, the exercise each answers)."""
    global _CHANNEL
    _ALL_SOURCES[:] = [(int(index), str(source)) for index, source in sources]
    _ANSWERS.clear()
    _ANSWERS.update({int(index): str(exercise) for index, exercise in answers})
    shell = get_ipython()
    if shell is not None:
        checks.explain_name_errors(shell, _missing_from_submission)
    try:
        _CHANNEL = Channel(info, cell_seconds)
    except Exception as error:  # noqa: BLE001 - reported as the reason, never raised into the grader
        return f"the channel to the submission's kernel could not be opened ({type(error).__name__}: {error})"
    return _CHANNEL.broken


def _missing_from_submission(name: str, namespace: dict) -> str:
    """What a test's NameError says in the feedback: a name of the submission that it does not have."""
    defined = checks.binds(no_credit.SOURCES)
    renamed = renamed_advice(name, defined)
    if renamed is not None:
        return renamed
    if name in defined:
        return (f"a cell of your notebook above this test defines {name}, but it did not exist when the test ran: "
                "that cell raised before it got there (its error is in your notebook)")
    return (f"your notebook does not define {name}: its answer cell above this test must, with the name and "
            "arguments the released notebook gives it")


def outside_the_rule(user_ns: dict, test_source: str, cell_index: int, exercise: str | None) -> str | None:
    """Before test cell ``cell_index`` of ``exercise`` (its whole source): why the code rule gives it no
    credit, or None. The tested names are those it reads that this kernel's own cells did not define."""
    trusted = {name for name, value in user_ns.items() if _INJECTED.get(name, _NOT_INJECTED) is not value}
    cells = [code_rule.Cell(index, source, _ANSWERS.get(index)) for index, source in _ALL_SOURCES if index < cell_index]
    return code_rule.outside_the_rule(cells, test_source, exercise, trusted)


_NOT_INJECTED = object()


def bind(user_ns: dict, cell_source: str = "", cell_index: int | None = None) -> str | None:
    """Before test cell ``cell_index``: the submission's current names into ``user_ns``; the reason if it fails.

    Every function and small value comes; a large value only if ``cell_source`` mentions its name.
    The no-credit rule reads the cells above this one (what has run when the test runs).
    """
    no_credit.SOURCES[:] = [source for index, source in _ALL_SOURCES if cell_index is None or index < cell_index]
    for name, value in list(_INJECTED.items()):
        if user_ns.get(name) is value:
            del user_ns[name]
    _INJECTED.clear()
    if _CHANNEL is None:
        return "the channel to the submission's kernel is not open"
    _CHANNEL.new_cell()
    try:
        found = _CHANNEL.namespace(set(user_ns), set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", cell_source)))
    except ChannelError as error:
        return f"the submission's names could not be read: {error}"
    for name, value in found.items():
        user_ns[name] = _INJECTED[name] = value
    return None


def failed_line() -> int | None:
    """The line (1-based, in its cell) of the last cell that raised: its frame is the second of the
    traceback IPython keeps (the first is IPython's run_code)."""
    trace = getattr(sys, "last_traceback", None)
    return trace.tb_next.tb_lineno if trace is not None and trace.tb_next is not None else None


def load_ipython_extension(shell) -> None:
    remote_call.serve(shell, TARGET, {
        "connect": connect,
        "bind": lambda **arguments: bind(shell.user_ns, **arguments),
        "outside_the_rule": lambda **arguments: outside_the_rule(shell.user_ns, **arguments),
        "failed_line": failed_line,
    })
