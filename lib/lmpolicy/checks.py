"""What notebook test cells call: checks that fail with a message a student can act on.

Every failure raises ``CheckFailed`` (an ``AssertionError``) whose first line says what is wrong in
plain words, e.g. "softmax(...) returned a list; return a torch.Tensor". Test cells route every
comparison through this module (never ``np.allclose`` directly), so the grader has one place to trust.

    from lmpolicy import checks
    probs = checks.call_student(softmax, logits)
    checks.check_type(probs, torch.Tensor, "softmax(logits)")
    checks.check_close(probs, expected, "softmax(logits)", hint="subtract the max first")
    checks.done("nb01_softmax")

The checks return None (``check_type`` returns the value and ``check_number`` the float), so a test
cell ending with a check shows no value: nbgrader would read a number shown there as partial credit.
"""
from __future__ import annotations

import contextlib
import os
import sys
import types

import numpy as np

from lmpolicy import progress


class CheckFailed(AssertionError):
    """A check failed; the message's first line says what is wrong."""


class StudentCodeRaised(CheckFailed):
    """The student's function raised an exception."""


class LibraryShortcutUsed(CheckFailed):
    """The student's code called the library function the exercise asks them to write."""


def _fail(message: str, hint: str | None = None, error: type[CheckFailed] = CheckFailed):
    raise error(message if hint is None else f"{message}\nHint: {hint}")


def _verb(what: str) -> str:
    return "returned" if what.endswith(")") else "is"


def _type_name(kind) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_type_name(k) for k in kind)
    module = kind.__module__
    return kind.__name__ if module == "builtins" else f"{module.split('.')[0]}.{kind.__name__}"


def _as_array(value, what: str) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().double().numpy()
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        _fail(f"{what} {_verb(what)} {type(value).__name__} {value!r:.60}, which is not a number or an array of numbers")
    return array


def check(condition, message: str, hint: str | None = None) -> None:
    """Fail with ``message`` unless ``condition`` holds (for properties with their own words)."""
    if not condition:
        _fail(message, hint)


def _not_none(value, what: str) -> None:
    if value is None:
        _fail(f"{what} {_verb(what)} None: the answer is still a stub, or a `return` is missing")


def check_type(value, expected_type, what: str):
    """``value`` must be an instance of ``expected_type`` (a type or tuple of types); returns it."""
    if expected_type is not type(None):
        _not_none(value, what)
    if not isinstance(value, expected_type):
        _fail(f"{what} {_verb(what)} a {type(value).__name__}; {'return' if _verb(what) == 'returned' else 'it should be'} "
              f"a {_type_name(expected_type)}")
    return value


def check_number(value, what: str) -> float:
    """``value`` must be one real number (int, float, numpy scalar, 0-d array or tensor); returns it as float."""
    _not_none(value, what)
    if isinstance(value, bool) or isinstance(value, (str, bytes)):
        _fail(f"{what} {_verb(what)} a {type(value).__name__}; it should be a number")
    array = _as_array(value, what)
    if array.size != 1:
        _fail(f"{what} {_verb(what)} {array.size} numbers (shape {tuple(array.shape)}); it should be one number")
    return float(array.reshape(()))


def check_shape(value, expected_shape, what: str):
    """``value.shape`` must equal ``expected_shape``."""
    shape = getattr(value, "shape", None)
    if shape is None:
        _fail(f"{what} {_verb(what)} a {type(value).__name__}, which has no shape; expected shape {tuple(expected_shape)}")
    if tuple(shape) != tuple(expected_shape):
        _fail(f"{what} has shape {tuple(shape)}; expected {tuple(expected_shape)}")


def check_finite(value, what: str, hint: str | None = None):
    """No NaN or infinity anywhere in ``value``; says which and where."""
    array = _as_array(value, what)
    bad = ~np.isfinite(array)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        first = array[index]
        kind = "NaN" if np.isnan(first) else ("+inf" if first > 0 else "-inf")
        where = f" at index {index}" if index else ""
        _fail(f"{what} contains {kind}{where} ({int(bad.sum())} of {array.size} entries are not finite)", hint)


def check_close(actual, expected, what: str, hint: str | None = None, atol: float = 1e-6, rtol: float = 1e-5):
    """``actual`` must equal ``expected`` within ``atol + rtol * |expected|``, element by element.

    The message shows expected vs got at the worst entry.
    """
    _not_none(actual, what)
    got = _as_array(actual, what)
    want = _as_array(expected, f"the expected value of {what}")
    if got.shape != want.shape:
        _fail(f"{what} has shape {tuple(got.shape)}; expected {tuple(want.shape)}", hint)
    check_finite(got, what, hint)
    error = np.abs(got - want) - (atol + rtol * np.abs(want))
    if (error > 0).any():
        index = np.unravel_index(int(np.argmax(error)), error.shape) if error.ndim else ()
        where = f" at index {tuple(int(i) for i in index)}" if index else ""
        _fail(f"{what} is off{where}: expected {want[index]:.6g}, got {got[index]:.6g}", hint)


def check_equal(actual, expected, what: str, hint: str | None = None) -> None:
    """``actual`` must equal ``expected`` exactly, element by element (token ids, masks, -inf patterns)."""
    _not_none(actual, what)
    got = _as_array(actual, what)
    want = _as_array(expected, f"the expected value of {what}")
    if got.shape != want.shape:
        _fail(f"{what} has shape {tuple(got.shape)}; expected {tuple(want.shape)}", hint)
    differ = got != want
    if differ.any():
        index = tuple(int(i) for i in np.argwhere(differ)[0])
        where = f" at index {index}" if index else ""
        _fail(f"{what} is wrong{where}: expected {want[index]:.6g}, got {got[index]:.6g} "
              f"({int(differ.sum())} of {got.size} entries differ)", hint)


def call_student(fn, *args, **kwargs):
    """Call the student's ``fn``; if it raises, fail with "your function f raised ValueError: ..."."""
    name = getattr(fn, "__name__", repr(fn))
    if not callable(fn):
        _fail(f"{name} is a {type(fn).__name__}, not a function: run its answer cell (and don't reuse the name)")
    try:
        return fn(*args, **kwargs)
    except CheckFailed:
        raise
    except NotImplementedError:
        _fail(f"your function {name} is not written yet (it raises NotImplementedError): replace the stub",
              error=StudentCodeRaised)
    except Exception as error:  # the student's bug, reported in their words
        _fail(f"your function {name} raised {type(error).__name__}: {error}", error=StudentCodeRaised)


def _record(exercise_key: str) -> None:
    """Record progress, except under the grader; a file that cannot be written never fails a check."""
    if os.environ.get("NBGRADER_EXECUTION"):
        return
    try:
        progress.record(exercise_key)
    except OSError as error:
        print(f"(your progress could not be saved to {progress.progress_file()}: {error})")


def done(exercise_key: str) -> None:
    """Record that the visible checks of ``exercise_key`` passed (not under the grader) and say so."""
    exercise = progress.exercise(exercise_key)
    _record(exercise_key)
    print(f"\u2713 {exercise.label} passed the visible checks")


def mark_done(exercise_key: str) -> None:
    """For a manually graded exercise: the student's own "I've done this one" (not under the grader)."""
    exercise = progress.exercise(exercise_key)
    _record(exercise_key)
    print(f"\u2713 {exercise.label} marked as done (your instructor grades it)")


def _blocker(message: str):
    namespace: dict = {}
    exec(  # a function whose code holds the message as a constant and needs no closure
        "def blocked(*args, **kwargs):\n"
        f"    raise __import__('lmpolicy.checks', fromlist=['_']).LibraryShortcutUsed({message!r})\n",
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


@contextlib.contextmanager
def no_library_shortcut(*library_functions):
    """While active, calling any of ``library_functions`` raises LibraryShortcutUsed.

    Python functions are blocked under every alias (their code is swapped), builtins by their module
    attribute, and C methods such as ``torch.Tensor.softmax`` on the Python subclasses of their class.

    Hidden tests wrap the student's call in it so that an answer delegating to lmpolicy's own
    implementation of the exercise earns nothing.
    """
    undos = []
    try:
        for fn in library_functions:
            undos.append(_block(fn))
        yield
    finally:
        for undo in reversed(undos):
            undo()
