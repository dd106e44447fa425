"""What notebook test cells call: checks that fail with a message a student can act on.

Every failure raises ``CheckFailed`` (an ``AssertionError``) whose first line says what is wrong in
plain words, e.g. "softmax(...) returned a list; return a torch.Tensor". Test cells route every
comparison through this module (never ``np.allclose`` directly), so the grader has one place to trust.

    from lmpolicy.notebook import checks
    probs = checks.call_student(softmax, logits)
    checks.check_type(probs, torch.Tensor, "softmax(logits)")
    checks.check_close(probs, expected, "softmax(logits)", hint="subtract the max first")
    checks.done("nb01_softmax")

The checks return None (``check_type`` returns the value and ``check_number`` the float), so a test
cell ending with a check shows no value: nbgrader would read a number shown there as partial credit.

A failed check shows as a few lines, not a traceback: ``CheckFailed`` implements IPython's
``_render_traceback_``, which the kernel uses for the error output, so the student's notebook,
nbgrader's Validate and the feedback all show the same short message. When the student's own
function raises, the message names the call and shows the student's frames only.

In a notebook kernel (not under the grader) each run of a check cell is recorded in
``lmpolicy.notebook.progress``: passed, or failing with its reason; running an exercise's answer cell again
with different code marks its passed checks "changed" until they run again. ``summary(notebook)``
prints what is left to do in a notebook.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import difflib
import linecache
import os
import re
import sys
import sysconfig
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmpolicy.notebook import progress
from lmpolicy.notebook.verdict_lines import wrapped

MAX_SHOWN_LINES = 8     # a failed check shows at most this many lines: message, the student's frames, hint
MAX_HINT_LINES = 2
MAX_STUDENT_FRAMES = 2  # the innermost frames of the student's code that raised
RED, BOLD, RESET = "\x1b[31m", "\x1b[1m", "\x1b[0m"


class CheckFailed(AssertionError):
    """A check failed; the message's first line says what is wrong.

    ``problem`` is the message without the hint, ``hint`` the hint or None.
    """

    heading = "Check failed"

    def __init__(self, message: str = "", hint: str | None = None):
        super().__init__(message if hint is None else f"{message}\nHint: {hint}")
        self.problem, self.hint = message, hint

    def _details(self) -> list[str]:
        """Lines shown between the message and the hint (the student's frames, for StudentCodeRaised)."""
        return []

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: the message, the details and the hint, in a few lines."""
        problem = getattr(self, "problem", None)
        problem = str(self) if problem is None else problem
        hint = getattr(self, "hint", None)
        hint_lines = hint.strip().splitlines()[:MAX_HINT_LINES] if hint else []
        details = self._details()
        lines = problem.strip().splitlines() or [type(self).__name__]
        room = max(1, MAX_SHOWN_LINES - len(details) - len(hint_lines))
        if len(lines) > room:
            lines = lines[:room - 1] + [f"... ({len(lines) - room + 1} more lines)"] if room > 1 else lines[:1]
        shown = [f"{RED}{BOLD}\u2717 {self.heading}:{RESET} {lines[0]}", *lines[1:], *details]
        if hint_lines:
            shown += [f"{BOLD}Hint:{RESET} {hint_lines[0]}", *hint_lines[1:]]
        return wrapped(shown)


class StudentCodeRaised(CheckFailed):
    """The student's function raised an exception (kept as ``__cause__``)."""

    @property
    def heading(self) -> str:  # a stub that is not written yet raised nothing of the student's own
        return "Your code raised an error" if self.__cause__ is not None else "Check failed"

    def _details(self) -> list[str]:
        cause = self.__cause__
        if cause is None:
            return []
        if _raised_under_the_grader(cause):  # its message and lines stayed in the submission's process
            return [WHERE_IT_RAISED] if getattr(cause, "from_the_submission", False) else []
        remote = getattr(cause, "remote_frames", None)  # a failure of the channel: no frames of the student's
        if isinstance(remote, list):
            return remote[-MAX_STUDENT_FRAMES:]
        frames = [f for f in traceback.extract_tb(cause.__traceback__) if _is_students(f.filename)]
        return [_frame_line(frame) for frame in frames[-MAX_STUDENT_FRAMES:]]


class LibraryShortcutUsed(CheckFailed):
    """The student's code called the library function the exercise asks them to write."""

    heading = "Not allowed"


def _library_folders() -> tuple[str, ...]:
    """Folders whose frames are never the student's: this package, the standard library, installed packages."""
    folders = {str(Path(__file__).resolve().parents[1])}  # all of lmpolicy
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            folders.add(str(Path(sysconfig.get_paths()[key]).resolve()))
    return tuple(folder + os.sep for folder in folders)


_LIBRARY_FOLDERS = _library_folders()


def _is_students(filename: str) -> bool:
    if filename.startswith("<") and not filename.startswith("<ipython-input"):
        return False  # <frozen ...>, <string>: never the student's
    with contextlib.suppress(OSError, ValueError):
        filename = str(Path(filename).resolve())
    return not filename.startswith(_LIBRARY_FOLDERS)


def _cell_name(filename: str) -> str:
    """"In [12]" for a notebook cell (IPython keeps the map), else the file's name."""
    shell = _ipython()
    count = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename) if shell else None
    return f"In [{count}]" if count is not None else Path(filename).name


def _frame_line(frame: traceback.FrameSummary) -> str:
    code = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    where = f"{_cell_name(frame.filename)}, line {frame.lineno}"
    text = f"  {where}, in {frame.name}: {code}" if frame.name != "<module>" else f"  {where}: {code}"
    return text if len(text) <= 120 else text[:117] + "..."  # wrapped with the rest, on two lines at most


# Under the grader the student's function runs in the submission's process, which holds the hidden inputs it was
# called with: its exception's message, its frames and the name of a class of its own can carry them. A verdict
# made there names a builtin exception's type and nothing else of it (the trusted side never receives the rest),
# and says where to see the whole of it: the same check in the student's own notebook, which quotes it.
BUILTIN_EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                               if isinstance(value, type) and issubclass(value, BaseException))
WHERE_IT_RAISED = "  (its message and line: run this check in your notebook)"


def shown_exception(name: str) -> str:
    """How a verdict made under the grader names an exception of the student's code: a builtin's name, else
    "an exception" (a class of the student's own can be named after anything it recorded)."""
    return name if name in BUILTIN_EXCEPTIONS else "an exception"


def _raised_under_the_grader(error: BaseException) -> bool:
    """An exception the trusted side made for one raised in the submission's process or by its channel."""
    return isinstance(getattr(error, "remote_frames", None), list)


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
        if _raised_under_the_grader(error) and getattr(error, "from_the_submission", False):
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


# --- recording what the checks found ---------------------------------------------------------------

DONE_CALL = re.compile(r"""\bdone\(\s*["']([A-Za-z0-9_]+)["']\s*\)""")


def running_under_grader() -> bool:
    """True while nbgrader executes the notebook (it sets NBGRADER_EXECUTION: validate or autograde)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def _ipython():
    module = sys.modules.get("IPython")
    return module.get_ipython() if module is not None else None


def _saving(action) -> None:
    """Run a progress update; a file that cannot be written never fails a check."""
    try:
        action()
    except OSError as error:
        print(f"(your progress could not be saved to {progress.progress_file()}: {error})")


class _CellRecorder:
    """IPython hooks: after each cell that holds ``checks.done("key")``, record passed or failing;
    after an answer cell runs, mark checks that passed on other code for it as changed."""

    def __init__(self):
        self.passed_in_cell: set[str] = set()
        self.cell_source = ""  # the cell running now
        self.ran: dict[str, str] = {}  # cell id -> fingerprint of the code it last ran
        self._answer_cells: tuple[str, dict[str, str]] | None = None

    def pre_run_cell(self, info) -> None:
        self.passed_in_cell.clear()
        self.cell_source = getattr(info, "raw_cell", "") or ""

    def answer_cells(self) -> dict[str, str]:
        """``{cell id: exercise key}`` of this kernel's notebook (JupyterLab names it in JPY_SESSION_NAME)."""
        path = os.environ.get("JPY_SESSION_NAME", "")
        if self._answer_cells is None or self._answer_cells[0] != path:
            cells = {}
            if path.endswith(".ipynb") and Path(path).exists():
                with contextlib.suppress(Exception):  # an unreadable notebook only loses the "changed" state
                    cells = progress.answer_cells(Path(path).stem, Path(path))
            self._answer_cells = (path, cells)
        return self._answer_cells[1]

    def post_run_cell(self, result) -> None:
        """Record what the cell's checks found; a failure here prints one line, never a traceback."""
        info = getattr(result, "info", None)
        if running_under_grader() or info is None or isinstance(result.error_in_exec, KeyboardInterrupt):
            return  # an interrupted check neither passed nor failed
        try:
            self._record(result)
        except Exception as error:  # noqa: BLE001 - the record must never break the student's notebook
            print(f"(lmpolicy could not record this cell's checks: {type(error).__name__}: {error})")
        say_outside_the_code_rule(info.raw_cell or "")

    def _record(self, result) -> None:
        source = result.info.raw_cell or ""
        cell_id = getattr(result.info, "cell_id", None)
        keys = [k for k in dict.fromkeys(DONE_CALL.findall(source)) if k in progress.EXERCISES_BY_KEY]
        error = result.error_in_exec or result.error_before_exec
        if keys:
            check = progress.fingerprint(source)
            for key in keys:
                if error is not None:
                    _saving(lambda: progress.record_failure(key, _reason(error), check))
                elif key in self.passed_in_cell:
                    _saving(lambda: progress.record(key, check, self.answer_of(key)))
        elif cell_id:
            key = self.answer_cells().get(cell_id)
            fingerprint = progress.fingerprint(source)
            self.ran[cell_id] = fingerprint
            if key:
                _saving(lambda: progress.record_answer_run(key, cell_id, fingerprint))

    def answer_of(self, key: str) -> dict[str, str]:
        """Fingerprints of the answer cells of ``key`` as this kernel last ran them."""
        return {cell: self.ran[cell] for cell, owner in self.answer_cells().items() if owner == key and cell in self.ran}


# --- the grader's code rule, said when a check runs (lmpolicy.notebook.code_rule judges; nothing here is blocked) ----------

def say_outside_the_code_rule(cell_source: str) -> None:
    """After a check cell (one holding ``done("key")``) in the student's own kernel: one ✗ line when a cell this
    kernel ran holds a construct outside the grader's code rule (``%matplotlib inline``, ``import os``, a syntax
    error...), which at grading costs every exercise checked below it. The cells judged are IPython's history of
    this session as the student typed them (``In``, raw), the check cells left out (the grader runs its own)."""
    if not DONE_CALL.search(cell_source):
        return
    history = getattr(getattr(_ipython(), "history_manager", None), "input_hist_raw", None) or []
    try:
        from lmpolicy.notebook import code_rule  # here, not at the top: the grading kernel never needs it

        found = code_rule.first_outside_in_history(
            [(count, source) for count, source in enumerate(history) if not DONE_CALL.search(source)])
        if found is None:
            return
        outside, others = found
        text = outside.student_line(f"In [{outside.cell.index}]")
    except Exception:  # noqa: BLE001 - a judgement that fails says nothing; the grader judges for itself
        return
    more = f"{others} more cell{'s' if others > 1 else ''} too; " if others else ""
    print("\n".join(wrapped([f"{RED}{BOLD}\u2717 When graded:{RESET} {text} ({more}Validate lists what the saved "
                              "notebook holds)"])))


def _reason(error: BaseException) -> str:
    if isinstance(error, CheckFailed):
        text = (getattr(error, "problem", None) or str(error)).strip().splitlines()
        return text[0] if text else type(error).__name__
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


_RECORDER: _CellRecorder | None = None


def _install_recorder() -> _CellRecorder | None:
    """Register the hooks once per IPython shell; None outside IPython or under the grader."""
    global _RECORDER
    shell = _ipython()
    if shell is None or running_under_grader():
        return None
    if _RECORDER is None or getattr(shell, "_lmpolicy_recorder", None) is not _RECORDER:
        _RECORDER = _CellRecorder()
        shell.events.register("pre_run_cell", _RECORDER.pre_run_cell)
        shell.events.register("post_run_cell", _RECORDER.post_run_cell)
        explain_name_errors(shell, _undefined_name_advice)
        shell._lmpolicy_recorder = _RECORDER
    return _RECORDER


@dataclass(frozen=True)
class NameAdvice:
    """What to do about a NameError; ``alone``: the advice says all, IPython's traceback would only hide it."""
    text: str
    alone: bool = False


def explain_name_errors(shell, advice) -> None:
    """Make a NameError that reaches a cell of IPython ``shell`` end with "✗ Not defined yet:" and
    ``advice(name, namespace)``: what to do about it (a str, or a NameAdvice). IPython's own traceback
    comes first, unless the advice is a NameAdvice that stands alone: then it is the one line shown."""
    def explain(shell, etype, value, tb, tb_offset=None) -> list[str]:
        shown = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
        try:
            name = getattr(value, "name", None)
            if name:
                found = advice(name, shell.user_ns)
                found = found if isinstance(found, NameAdvice) else NameAdvice(str(found))
                lines = wrapped([f"{RED}{BOLD}\u2717 Not defined yet:{RESET} {found.text}"])
                shown = lines if found.alone else [*shown, *lines]
        except Exception:  # noqa: BLE001 - the advice must never hide the error itself
            pass
        sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # for %debug, as IPython's display
        shell._showtraceback(etype, value, shown)
        return shown
    shell.set_custom_exc((NameError,), explain)


def _undefined_name_advice(name: str, namespace: dict) -> NameAdvice:
    """In the student's kernel: most often a cell ran before the cell that defines the name (after a
    kernel restart, say): then the advice is all there is to say. Else the name is misspelt: in the
    student's own cell IPython's traceback shows the line, in a check cell only the check's insides."""
    path = Path(os.environ.get("JPY_SESSION_NAME", ""))
    cells = progress.notebook_cells(path) if path.suffix == ".ipynb" and path.exists() else []
    defining = [cell for cell in cells if cell.cell_type == "code" and name in binds([cell.source])]
    if defining:
        key = progress.answer_cells(path.stem, path).get(getattr(defining[0], "id", None))
        where = (f"{progress.exercise(key).label}'s answer cell" if key in progress.EXERCISES_BY_KEY
                 else "a cell of this notebook")
        return NameAdvice(f"{name} is defined in {where}, which has not run in this kernel: run it first. After a "
                          "restart (or to be sure), Run \u25b8 Run All Above runs every cell above this one.", alone=True)
    known = {n for cell in cells if cell.cell_type == "code" for n in binds([cell.source])}
    known |= {n for n in namespace if not n.startswith("_")}
    close = difflib.get_close_matches(name, sorted(known), n=1)
    unknown = f"nothing in this notebook defines {name}" if cells else f"{name} is not defined in this kernel"
    in_a_check = _RECORDER is not None and bool(DONE_CALL.search(_RECORDER.cell_source))
    return NameAdvice(unknown + (f"; did you mean {close[0]}?" if close
                                 else ": check its spelling, or run the cell that defines it."), alone=in_a_check)


# --- what a cell binds (the student's advice and the grader's no-credit rule read it alike) ----

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


def done(exercise_key: str) -> None:
    """The visible checks of ``exercise_key`` passed: say so, and record it (not under the grader).

    In a notebook kernel the record is written when the cell ends, with the cell's fingerprint, so
    a check cell that fails after this call still counts as failing; elsewhere it is written now.
    """
    exercise = progress.exercise(exercise_key)
    if not running_under_grader():
        recorder = _install_recorder()
        if recorder is not None:
            recorder.passed_in_cell.add(exercise_key)
        else:
            _saving(lambda: progress.record(exercise_key))
    print(f"\u2713 {exercise.label} passed the visible checks")


def _this_notebook(name: str) -> Path | None:
    """The notebook file this kernel belongs to, when it is notebook ``name`` (JupyterLab tells)."""
    path = Path(os.environ.get("JPY_SESSION_NAME", ""))
    return path if path.suffix == ".ipynb" and path.stem == name and path.exists() else None


def mark_done(exercise_key: str) -> None:
    """For a written answer: says whether its cell holds an answer yet (as last saved); records nothing.

    A written answer counts on the start page when its cell holds text other than the placeholder,
    so there is nothing to tick by hand.
    """
    exercise = progress.exercise(exercise_key)
    if running_under_grader():
        return
    states = [s for s in progress.item_states(exercise.notebook, student_notebook=_this_notebook(exercise.notebook))
              if s.item.exercise == exercise and s.item.written]
    if states and all(s.done for s in states):
        print(f"\u2713 {exercise.label}: your written answer is in its cell (your instructor grades it)")
    else:
        print(f"{exercise.label}: the answer cell still holds its placeholder (as last saved): write your answer "
              "there and save the notebook (Ctrl+S); the start page counts it then")


def summary(notebook: str) -> None:
    """Print notebook ``notebook``'s graded items with their state: passed, failing (with the reason),
    changed since it passed, not attempted, written answer still empty."""
    if running_under_grader():
        print("(the summary of your checks appears when you run this cell yourself, not under nbgrader)")
        return
    print(progress.notebook_summary(notebook, student_notebook=_this_notebook(notebook)))


_install_recorder()


def _blocker(message: str):
    namespace: dict = {}
    exec(  # a function whose code holds the message as a constant and needs no closure
        "def blocked(*args, **kwargs):\n"
        f"    raise __import__('lmpolicy.notebook.checks', fromlist=['_']).LibraryShortcutUsed({message!r})\n",
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


def active_blocks() -> list:
    """The library functions blocked right now (the grader sends them to the submission's process)."""
    return [fn for group in _ACTIVE_BLOCKS for fn in group]


@contextlib.contextmanager
def no_library_shortcut(*library_functions):
    """While active, calling any of ``library_functions`` raises LibraryShortcutUsed.

    Python functions are blocked under every alias (their code is swapped), builtins by their module
    attribute, and C methods such as ``torch.Tensor.softmax`` on the Python subclasses of their class.

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
