"""Library functions made to refuse while a check calls the student's code: ``no_library_shortcut``; and torch's
operators that compute an exercise's quantity: ``refusing_operators``.

Python functions are blocked under every alias (their code is swapped), builtins by their module attribute, and
C methods such as ``torch.Tensor.softmax`` on the Python subclasses of their class. A blocked call raises
``LibraryShortcutUsed``; leaving the block puts everything back, whatever happened inside.

Names are many and torch keeps adding them (a softmax is inside attention, the losses, the distributions), but every
path into torch ends in its operators (``aten::_softmax``, ``aten::_safe_softmax``, ``aten::_log_softmax``...),
and while a Python dispatch mode is on, each operator a call runs passes through it, fused ones decomposed: so an
operator whose name matches the exercise's pattern refuses, however the student's code reached it.
"""
from __future__ import annotations

import contextlib
import sys
import types

from lmpolicy.notebook.failures import LibraryShortcutUsed


def _blocker(message: str):
    namespace: dict = {}
    exec(  # a function whose code holds the message as a constant and needs no closure
        "def blocked(*args, **kwargs):\n"
        f"    raise __import__('lmpolicy.notebook.failures', fromlist=['_']).LibraryShortcutUsed({message!r})\n",
        namespace,
    )
    return namespace["blocked"]


def _block_method(method):
    """A C method such as ``torch.Tensor.softmax``: shadow it on the Python subclasses of its class."""
    message = f"implement this yourself: calling .{method.__name__}() gets no credit"
    owners = [cls for cls in method.__objclass__.__subclasses__() if method.__name__ not in vars(cls)]
    for owner in owners:
        setattr(owner, method.__name__, _blocker(message))

    def undo():
        for owner in owners:
            delattr(owner, method.__name__)
    return undo


def _block(fn):
    """Make ``fn`` raise LibraryShortcutUsed however the student reached it; return the undo."""
    if isinstance(fn, types.MethodDescriptorType):
        return _block_method(fn)
    message = f"implement this yourself: calling {fn.__module__}.{fn.__name__} gets no credit"
    if isinstance(fn, types.FunctionType) and not fn.__closure__:
        original = fn.__code__
        fn.__code__ = _blocker(message).__code__  # every alias of fn sees the swap

        def undo():
            fn.__code__ = original
        return undo
    module = sys.modules.get(fn.__module__ or "")
    if module is None or getattr(module, fn.__name__, None) is not fn:
        raise TypeError(f"no_library_shortcut cannot block {fn!r}")
    setattr(module, fn.__name__, _blocker(message))
    return lambda: setattr(module, fn.__name__, fn)


_ACTIVE_BLOCKS: list[tuple] = []  # the library_functions of every no_library_shortcut now active


@contextlib.contextmanager
def refusing_operators(pattern: str, what: str):
    """While active, a torch operator whose name (``aten::_softmax``) fullmatches ``pattern`` raises
    LibraryShortcutUsed, saying that it computes ``what``."""
    import re

    from torch.utils._python_dispatch import TorchDispatchMode

    refused = re.compile(pattern)

    class RefuseOperators(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if refused.fullmatch(func.name()):
                raise LibraryShortcutUsed(f"implement this yourself: your code runs torch's {func.name()}, which "
                                          f"computes {what} for you, and that gets no credit")
            return func(*args, **(kwargs or {}))

    with RefuseOperators():
        yield


def active_blocks() -> list:
    """The library functions blocked right now (the grader sends them to the submission's process)."""
    return [fn for group in _ACTIVE_BLOCKS for fn in group]


@contextlib.contextmanager
def no_library_shortcut(*library_functions):
    """While active, calling any of ``library_functions`` raises LibraryShortcutUsed.

    Hidden tests wrap the student's call in it so that an answer delegating to lmpolicy's own
    implementation of the exercise earns nothing.
    """
    undos = []
    _ACTIVE_BLOCKS.append(library_functions)
    try:
        for fn in library_functions:
            undos.append(_block(fn))
        yield
    finally:
        _ACTIVE_BLOCKS.pop()
        for undo in reversed(undos):
            undo()
