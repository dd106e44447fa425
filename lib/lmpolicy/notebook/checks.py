"""What notebook test cells and the notebooks' check modules call: checks that fail with a message a student can act on.

Every failure raises ``CheckFailed`` (an ``AssertionError``, ``lmpolicy.notebook.failures``) whose first line says
what is wrong in plain words, e.g. "softmax(...) returned a list; return a torch.Tensor", and shows as a few lines,
not a traceback. When the student's own function raises, the message names the call and shows the student's
frames only.

    from lmpolicy.notebook import checks
    probs = checks.call_student(softmax, logits)
    checks.check_type(probs, torch.Tensor, "softmax(logits)")
    checks.check_close(probs, expected, "softmax(logits)", hint="subtract the max first")
    checks.done("nb01_softmax")

The checks return None (``check_type`` returns the value and ``check_number`` the float), so a test
cell ending with a check shows no value: nbgrader would read a number shown there as partial credit.

Importing this module in a notebook kernel (not under the grader) installs ``lmpolicy.notebook.recorder``, which
records each run of a check cell in ``lmpolicy.notebook.progress``; ``summary(notebook)`` prints what is left to do
in a notebook.
"""
from __future__ import annotations

import numpy as np

from lmpolicy.notebook import answer_runs, kernel, progress, recorder, save_request
# What test cells, check modules and the grader reach through ``checks``, each defined in its own module:
from lmpolicy.notebook.bindings import binds, bound_names, statements  # noqa: F401
from lmpolicy.notebook.blocking import active_blocks, no_library_shortcut  # noqa: F401
from lmpolicy.notebook.failures import (  # noqa: F401
    BOLD, BUILTIN_EXCEPTIONS, MAX_SHOWN_LINES, RED, RESET, WHERE_IT_RAISED, CheckFailed, LibraryShortcutUsed,
    StudentCodeRaised, raised_under_the_grader, shown_exception)
from lmpolicy.notebook.kernel import running_under_grader  # noqa: F401
from lmpolicy.notebook.name_advice import NameAdvice, explain_name_errors  # noqa: F401


def _fail(message: str, hint: str | None = None, error: type[CheckFailed] = CheckFailed):
    raise error(message, hint)


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
        # its type, not its text: a returned string could hold anything the student's code recorded
        _fail(f"{what} {_verb(what)} a {type(value).__name__}, which is not a number or an array of numbers")
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


def check_close(actual, expected, what: str, hint: str | None = None, atol: float = 1e-6, rtol: float = 1e-5,
                show_expected: bool = True):
    """``actual`` must equal ``expected`` within ``atol + rtol * |expected|``, element by element.

    The message shows expected vs got at the worst entry; with ``show_expected=False`` only what
    came back (for a check whose expected value is the answer itself).
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
        values = f"expected {want[index]:.6g}, got {got[index]:.6g}" if show_expected else f"got {got[index]:.6g}"
        _fail(f"{what} is off{where}: {values}", hint)


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


def _short(value) -> str:
    """An argument as a call description shows it: small tensors by value, big ones by shape."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        kind = "tensor" if hasattr(value, "detach") else "array"
        count = value.numel() if kind == "tensor" else value.size
        if value.ndim <= 1 and count <= 4:
            floating = str(value.dtype).split(".")[-1].startswith(("float", "complex"))
            values = ", ".join(f"{v:g}." if floating and float(v).is_integer() else f"{v:g}"
                               for v in map(float, value.reshape(-1).tolist()))
            return f"{kind}([{values}])"
        return f"<{kind} of shape {tuple(value.shape)}>"
    if isinstance(value, (bool, int, float, str, type(None))):
        text = repr(value)
        return text if len(text) <= 30 else text[:27] + "..."
    return f"<{type(value).__name__}>"


def describe_call(fn, *args, **kwargs) -> str:
    """``name(arg, ..., key=value)``, short enough for the first line of a message."""
    name = getattr(fn, "__name__", repr(fn))
    parts = [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def call_student(fn, *args, call: str | None = None, **kwargs):
    """Call the student's ``fn``; if it raises, fail with "f(...) raised ValueError: ..." and the
    student's frames. ``call`` is how the message names the call (default: built from the arguments)."""
    name = getattr(fn, "__name__", repr(fn))
    if not callable(fn):
        _fail(f"{name} is a {type(fn).__name__}, not a function: run its answer cell (and don't reuse the name)")
    try:
        return fn(*args, **kwargs)
    except LibraryShortcutUsed as error:
        raise LibraryShortcutUsed(f"{call or describe_call(fn, *args, **kwargs)}: {error.problem}", error.hint) from None
    except CheckFailed:
        raise
    except NotImplementedError:
        _fail(f"your function {name} is not written yet (it raises NotImplementedError): replace the stub",
              error=StudentCodeRaised)
    except Exception as error:  # the student's bug: in their own kernel in their words, under the grader by its type
        message = str(error).strip().splitlines()
        kind = type(error).__name__
        if raised_under_the_grader(error) and getattr(error, "from_the_submission", False):
            kind = shown_exception(kind)  # its message never crossed (trusted_tests.errors), its class name may lie
        raise StudentCodeRaised(f"{call or describe_call(fn, *args, **kwargs)} raised {kind}"
                                + (f": {message[0]}" if message else "")) from error


def call_counting(fn, callee: str, *args, **kwargs):
    """Call the student's ``fn`` as ``call_student`` does, counting its calls of the student's own
    function named ``callee`` (e.g. does entropy_slope differentiate your entropy?): (result, count).

    Under the grader ``fn`` may run in the submission's process; then it counts there.
    """
    counting = getattr(fn, "counting_calls_of", None)
    if counting is not None:
        return call_student(counting(callee), *args, **kwargs)
    namespace = getattr(fn, "__globals__", None)
    if namespace is None or not callable(namespace.get(callee)):
        return call_student(fn, *args, **kwargs), 0
    yours, calls = namespace[callee], []

    def counted(*inner_args, **inner_kwargs):
        calls.append(1)
        return yours(*inner_args, **inner_kwargs)
    namespace[callee] = counted
    try:
        result = call_student(fn, *args, **kwargs)
    finally:
        namespace[callee] = yours
    return result, len(calls)


def checking(exercise_key: str) -> None:
    """The cell running now checks ``exercise_key`` (before its checks run, so that a failure is recorded
    against it wherever the kernel does not know its notebook: nbclient, another front end)."""
    if not running_under_grader():
        recording = recorder.install()
        if recording is not None:
            recording.checking_in_cell.add(exercise_key)


def answers_from_finished_runs(*answers, names=(), namespace: dict | None = None) -> None:
    """The check cell's answers (objects it passes to a check, or ``names`` read from ``namespace``) must be what
    their cells finished making: one whose cell raised the last time it ran fails with ``answer_runs.LeftOver``
    ("prob_86 is left from an earlier run: its cell raised ..."), nothing judged; in JupyterLab, when the cell
    that made one is edited since it ran, the page says "Not checked" above the verdict and takes its ✓ lines out
    (``answer_runs.show_edited_since_run``). Nothing under the grader, which runs every cell in order."""
    if running_under_grader():
        return
    recording = recorder.install()
    if recording is None:
        return
    namespace = recording.shell.user_ns if namespace is None else namespace
    runs = recording.answer_runs
    read = runs.answer_names(answers, names, recording.cell_source, namespace)
    runs.refuse_left_over(read, namespace)
    answer_runs.show_edited_since_run(runs, read)


def done(exercise_key: str) -> None:
    """The visible checks of ``exercise_key`` passed: say so, and record it (not under the grader).

    In a notebook kernel the record is written when the cell ends, with the cell's fingerprint, so
    a check cell that fails after this call still counts as failing; elsewhere it is written now.
    """
    exercise = progress.exercise(exercise_key)
    if not running_under_grader():
        recording = recorder.install()
        if recording is not None:
            recording.passed_in_cell.add(exercise_key)
        else:
            recorder.saving(lambda: progress.record(exercise_key))
    print(f"\u2713 {exercise.label} passed the visible checks")


def mark_done(exercise_key: str) -> None:
    """For a written answer: says whether its cell holds an answer yet; records nothing.

    It reads the notebook file, so in JupyterLab it first asks JupyterLab to save the notebook
    (``save_request``) and reads what the student sees; elsewhere, or when the save did not come, it reads the
    notebook as last saved and says so. The start page shows a written answer as "written (graded by hand)"
    once its cell holds text other than the placeholder, so there is nothing to tick by hand.
    """
    exercise = progress.exercise(exercise_key)
    if running_under_grader():
        return
    notebook = kernel.this_notebook(exercise.notebook)
    saved_now = save_request.save_notebook(notebook)
    states = [s for s in progress.item_states(exercise.notebook, student_notebook=notebook)
              if s.item.exercise == exercise and s.item.written]
    written = bool(states) and all(s.written_in for s in states)
    if saved_now:
        if written:
            print(f"\u270e {exercise.label}: {progress.WRITTEN_STATUS}: your answer is in its cell (saved just now), "
                  "for your instructor to grade")
        else:
            print(f"{exercise.label}: the answer cell still holds its placeholder: write your answer there, then run "
                  "this cell again")
        return
    if written:
        print(f"\u270e {exercise.label}: {progress.WRITTEN_STATUS}: your answer is in its cell, as last saved, "
              "for your instructor to grade")
    else:
        print(f"{exercise.label}: the answer cell still holds its placeholder (as last saved): write your answer "
              "there, save the notebook (Ctrl+S, or Cmd+S on a Mac), then run this cell again; the start page "
              "counts it once saved")


def summary(notebook: str) -> None:
    """Print notebook ``notebook``'s graded items with their state: passed, failing (with the reason),
    changed since it passed, not attempted, written answer still empty."""
    if running_under_grader():
        print("(the summary of your checks appears when you run this cell yourself, not under nbgrader)")
        return
    print(progress.notebook_summary(notebook, student_notebook=kernel.this_notebook(notebook)))


# -- per-student variants (lmpolicy.per_student.variants) ----------------------------------------------------

def check_own_variant(exercise_key: str, submitted: dict) -> None:
    """Fail when a submitted number is the chapter's value (or another variant's) instead of the
    student's own, without showing the right value. ``submitted`` maps the notebook's variable names
    to what the student set; names whose answer is not a number are ignored."""
    from lmpolicy.per_student import variants

    for name, value in submitted.items():
        message = variants.other_variant_message(exercise_key, {name: value})
        if message:
            _fail(f"{name} = {check_number(value, name):.6g}: {message}")


def check_variant_answers(exercise_key: str, submitted: dict, hint: str | None = None,
                          show_expected: bool = True) -> None:
    """Every submitted answer of ``exercise_key`` against the current student's own exact answer
    (``lmpolicy.per_student.variants.answers``, with the tolerance each answer carries). Hidden tests call it as it is;
    a visible check calls it with ``show_expected=False``, so that a failure never shows the right value."""
    from lmpolicy.per_student import variants

    check_own_variant(exercise_key, submitted)
    expected = variants.answers(exercise_key)
    for name, value in submitted.items():
        answer = expected[name]
        if answer.numeric:
            check_close(check_number(value, name), answer.value, f"{name} for your model", hint=hint,
                        atol=answer.atol, rtol=answer.rtol, show_expected=show_expected)
        else:
            check(value == answer.value, f"{name} is {value!r}, which is not right", hint=hint)


recorder.install()
