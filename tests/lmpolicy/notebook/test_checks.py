"""lmpolicy.notebook.checks: failures carry a message a student can act on; done() and the shortcut guard."""
import json
import os
import re

import numpy as np
import pytest
import torch

from lmpolicy.notebook import checks, progress
from lmpolicy.notebook.verdict_lines import CONTINUATION, WIDTH
from tests.verdicts import one_line


def first_line(excinfo) -> str:
    return str(excinfo.value).splitlines()[0]


def test_check_type_names_what_was_returned_and_what_is_wanted():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_type([0.5, 0.5], torch.Tensor, "softmax(logits)")
    assert first_line(excinfo) == "softmax(logits) returned a list; return a torch.Tensor"
    assert isinstance(excinfo.value, AssertionError)
    tensor = torch.zeros(2)
    assert checks.check_type(tensor, torch.Tensor, "softmax(logits)") is tensor


def test_a_stub_answer_is_reported_as_a_stub():
    with pytest.raises(checks.CheckFailed, match="p_86 is None: the answer is still a stub"):
        checks.check_number(None, "p_86")
    with pytest.raises(checks.CheckFailed, match="returned None"):
        checks.check_close(None, 1.0, "softmax(z)")


def test_check_number_accepts_scalars_of_every_kind_and_rejects_the_rest():
    for value in (0.25, np.float32(0.25), torch.tensor(0.25), np.array([0.25]), 1 / 4):
        assert checks.check_number(value, "x") == 0.25
    with pytest.raises(checks.CheckFailed, match="x is a str; it should be a number"):
        checks.check_number("0.25", "x")
    with pytest.raises(checks.CheckFailed, match=r"2 numbers \(shape \(2,\)\)"):
        checks.check_number(torch.zeros(2), "x")


def test_check_shape_shows_both_shapes():
    with pytest.raises(checks.CheckFailed, match=r"probs has shape \(2, 3\); expected \(3,\)"):
        checks.check_shape(torch.zeros(2, 3), (3,), "probs")
    with pytest.raises(checks.CheckFailed, match="has no shape"):
        checks.check_shape([1, 2, 3], (3,), "probs")


def test_check_finite_says_which_value_and_where():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_finite(torch.tensor([[0.0, 1.0], [float("-inf"), float("nan")]]), "logp")
    assert first_line(excinfo) == "logp contains -inf at index (1, 0) (2 of 4 entries are not finite)"
    with pytest.raises(checks.CheckFailed, match="contains NaN"):
        checks.check_finite(float("nan"), "entropy")


def test_check_close_shows_expected_and_got_at_the_worst_entry_and_the_hint():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_close(np.array([0.1, 0.2, 0.9]), [0.1, 0.25, 0.65], "probs", hint="divide by the sum")
    lines = str(excinfo.value).splitlines()
    assert lines[0] == "probs is off at index (2,): expected 0.65, got 0.9"
    assert lines[1] == "Hint: divide by the sum"
    checks.check_close(torch.tensor([0.1, 0.2]), [0.1, 0.2 + 1e-7], "probs")
    with pytest.raises(checks.CheckFailed, match="expected 2, got 2.1"):
        checks.check_close(2.1, 2.0, "J", atol=0.05, rtol=0)
    checks.check_close(2.04, 2.0, "J", atol=0.05, rtol=0)


def test_check_equal_is_exact_and_says_where_it_differs():
    checks.check_equal(torch.tensor([2.0, float("-inf")]), [2.0, -np.inf], "filtered")
    checks.check_equal(torch.tensor([True, False]), np.array([1, 0]), "mask")
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_equal(torch.tensor([[1, 2], [3, 4]]), [[1, 2], [3, 5]], "ids", hint="h")
    assert str(excinfo.value).splitlines() == ["ids is wrong at index (1, 1): expected 5, got 4 (1 of 4 entries differ)",
                                              "Hint: h"]
    with pytest.raises(checks.CheckFailed, match="expected -inf, got 1"):
        checks.check_equal([1.0], [-np.inf], "filtered")
    with pytest.raises(checks.CheckFailed, match=r"shape \(3,\); expected \(2,\)"):
        checks.check_equal([1, 2, 3], [1, 2], "ids")


def test_call_student_reports_the_students_exception_in_words():
    def softmax(z):
        raise ValueError("bad logits")

    with pytest.raises(checks.StudentCodeRaised) as excinfo:
        checks.call_student(softmax, torch.zeros(3))
    assert first_line(excinfo) == "softmax(tensor([0., 0., 0.])) raised ValueError: bad logits"
    with pytest.raises(checks.StudentCodeRaised) as excinfo:
        checks.call_student(softmax, torch.zeros(4, 7), call="softmax(logits of shape (4, 7))")
    assert first_line(excinfo) == "softmax(logits of shape (4, 7)) raised ValueError: bad logits"

    def stub(z):
        raise NotImplementedError()

    with pytest.raises(checks.StudentCodeRaised, match="not written yet"):
        checks.call_student(stub, 1)
    with pytest.raises(checks.CheckFailed, match="not a function"):
        checks.call_student(3.0, 1)
    assert checks.call_student(lambda a, b=0: a + b, 1, b=2) == 3


def test_done_records_progress_and_prints_the_label(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "p.json"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    checks.done("ex11_1a")
    assert capsys.readouterr().out.strip() == "\u2713 Exercise 11.1(a) passed the visible checks"
    assert set(json.loads((tmp_path / "p.json").read_text())["done"]) == {"ex11_1a"}


def test_mark_done_ticks_nothing_and_says_the_written_answer_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "p.json"))
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(tmp_path / "no-copy-yet"))  # the release copy: placeholders
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    checks.mark_done("ex11_1b")
    assert "still holds its placeholder" in capsys.readouterr().out
    assert progress.load() == {}


def test_mark_done_says_a_written_answer_is_graded_by_hand_not_done(tmp_path, monkeypatch, capsys):
    import shutil

    import nbformat

    copy = tmp_path / "work" / "ch11"
    shutil.copytree(progress.release_dir(), copy)
    notebook = nbformat.read(copy / "01_policy_softmax.ipynb", as_version=4)
    next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ex11_1b__manual").source = "By ..."
    nbformat.write(notebook, copy / "01_policy_softmax.ipynb")
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "p.json"))
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(copy))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    checks.mark_done("ex11_1b")
    said = capsys.readouterr().out.strip()
    assert said.startswith("\u270e Exercise 11.1(b): written (graded by hand)") and "\u2713" not in said
    assert progress.load() == {}


def test_done_writes_nothing_under_the_grader(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "p.json"))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    checks.done("ex11_1a")
    checks.mark_done("ex11_1b")
    assert not (tmp_path / "p.json").exists()
    assert "11.1(a)" in capsys.readouterr().out


def test_done_still_passes_when_the_progress_file_cannot_be_written(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(blocker / "progress.json"))  # parent is a file
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    checks.done("ex11_1a")
    out = capsys.readouterr().out
    assert "could not be saved" in out and "\u2713 Exercise 11.1(a) passed the visible checks" in out


def test_done_rejects_an_unknown_exercise_key():
    with pytest.raises(KeyError, match="unknown exercise key 'ex11_99'"):
        checks.done("ex11_99")


def test_no_library_shortcut_blocks_every_alias_and_restores_afterwards():
    import torch.nn.functional as F
    from torch.nn.functional import softmax as aliased  # bound before the guard starts

    z = torch.tensor([2.0, 1.0, 0.0])
    with checks.no_library_shortcut(F.softmax, torch.softmax):
        for student in (lambda x: aliased(x, -1), lambda x: F.softmax(x, -1), lambda x: torch.softmax(x, -1)):
            with pytest.raises(checks.LibraryShortcutUsed) as excinfo:
                checks.call_student(student, z)
            assert "implement this yourself: calling torch." in first_line(excinfo)
            assert "gets no credit" in first_line(excinfo)
        assert torch.exp(z).sum() > 0  # unrelated functions still work
    expected = np.exp([2.0, 1.0, 0.0]) / np.exp([2.0, 1.0, 0.0]).sum()
    checks.check_close(aliased(z, -1), expected, "softmax after the guard")
    checks.check_close(torch.softmax(z, -1), expected, "torch.softmax after the guard")


def test_no_library_shortcut_blocks_a_tensor_method_and_restores_it():
    z = torch.tensor([2.0, 1.0, 0.0])
    with checks.no_library_shortcut(torch.Tensor.softmax):
        with pytest.raises(checks.LibraryShortcutUsed, match=r"calling \.softmax\(\) gets no credit"):
            checks.call_student(lambda x: x.softmax(-1), z)
        with pytest.raises(checks.LibraryShortcutUsed):
            checks.call_student(lambda x: torch.nn.Parameter(x).softmax(-1), z)
    assert "softmax" not in vars(torch.Tensor)
    expected = np.exp([2.0, 1.0, 0.0]) / np.exp([2.0, 1.0, 0.0]).sum()
    checks.check_close(z.softmax(-1), expected, "Tensor.softmax after the guard")


def test_no_library_shortcut_restores_even_when_the_block_raises():
    import torch.nn.functional as F

    with pytest.raises(RuntimeError):
        with checks.no_library_shortcut(F.softmax):
            raise RuntimeError("test cell error")
    assert torch.allclose(F.softmax(torch.zeros(2), -1), torch.full((2,), 0.5))


# --- what the student sees: IPython's _render_traceback_, in a real kernel -------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def rendered(error: BaseException) -> list[str]:
    return [ANSI.sub("", line) for line in error._render_traceback_()]


def one_verdict(shown: list[str]) -> str:
    """The text of ``shown`` when it is a single ✗ line wrapped between words (its other lines are its continuation)."""
    assert shown[0].startswith("\u2717") and all(re.match(CONTINUATION + r"\S", line) for line in shown[1:]), shown
    assert all(len(line) <= WIDTH for line in shown), shown
    return one_line(shown)


def test_a_long_verdict_is_wrapped_between_words_to_fit_the_output_area():
    """JupyterLab breaks a long output line inside a word ("firs" / "t."); the course's verdicts arrive wrapped."""
    words = " ".join(f"word{i}" for i in range(60))
    shown = rendered(checks.CheckFailed(words, hint="one two " * 20))
    assert len(shown) > 2 and all(len(line) <= WIDTH for line in shown), shown
    hint = next(i for i, line in enumerate(shown) if line.startswith("Hint:"))
    assert one_line(shown[:hint]) == "\u2717 Check failed: " + words
    assert one_line(shown[hint:]) == "Hint: " + ("one two " * 20).strip()
    coloured = checks.CheckFailed(words)._render_traceback_()
    assert coloured[0].startswith(checks.RED + checks.BOLD + "\u2717 Check failed:" + checks.RESET + " word0")


def test_a_failed_check_renders_as_its_message_and_hint_only():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_close([0.1, 0.9], [0.1, 0.8], "softmax(z)", hint="divide by the sum")
    assert rendered(excinfo.value) == ["\u2717 Check failed: softmax(z) is off at index (1,): expected 0.8, got 0.9",
                                       "Hint: divide by the sum"]
    long = checks.CheckFailed("\n".join(f"line {i}" for i in range(20)), hint="h\nmore\nand more")
    shown = rendered(long)
    assert len(shown) == 8 and shown[5] == "... (15 more lines)" and shown[-2:] == ["Hint: h", "more"]


def test_check_close_can_withhold_the_expected_value():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_close(0.3, 0.126, "logprob_86", show_expected=False)
    assert first_line(excinfo) == "logprob_86 is off: got 0.3"


def test_a_library_shortcut_names_the_call_that_made_it():
    import torch.nn.functional as F

    with checks.no_library_shortcut(F.softmax):
        with pytest.raises(checks.LibraryShortcutUsed) as excinfo:
            checks.call_student(lambda x: F.softmax(x, -1), torch.zeros(2), call="softmax(z)")
    assert first_line(excinfo).startswith("softmax(z): implement this yourself: calling torch.nn.functional.softmax")
    assert rendered(excinfo.value)[0].startswith("\u2717 Not allowed: softmax(z)")


def start_ipc_kernel(env=None):
    """A python3 kernel and its ready client, on IPC sockets in a folder of its own. Over TCP, the ports picked free
    for a kernel can be taken by another test's kernel before it binds them (CI: "Address already in use", and the
    kernel dead before its kernel_info reply)."""
    import tempfile

    from jupyter_client.manager import KernelManager

    folder = os.path.join(tempfile.gettempdir(), f"lmpolicy-test-kernels-{os.getpid()}")  # one per test process:
    os.makedirs(folder, exist_ok=True)  # its kernels start one at a time, each on socket files no other has
    manager = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(folder, "kernel"))
    manager.start_kernel(**({} if env is None else {"env": env}))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
    except RuntimeError:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        raise
    return manager, client


class Kernel:
    """A real IPython kernel, sent execute requests the way JupyterLab sends them (with the cell id)."""

    def __init__(self, env):
        self.manager, self.client = start_ipc_kernel(env)

    def run(self, code: str, cell_id: str | None = None) -> tuple[str, dict | None]:
        """Run ``code``; (printed text, the error content or None)."""
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": False}
        message = self.client.session.msg("execute_request", content, metadata={"cellId": cell_id} if cell_id else {})
        self.client.shell_channel.send(message)
        printed, error = [], None
        while True:
            reply = self.client.get_iopub_msg(timeout=60)
            if reply["parent_header"].get("msg_id") != message["header"]["msg_id"]:
                continue
            if reply["msg_type"] == "stream":
                printed.append(reply["content"]["text"])
            elif reply["msg_type"] == "error":
                error = reply["content"]
            elif reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
                return "".join(printed), error

    def close(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture
def kernel(tmp_path):
    import os

    notebook = tmp_path / "02_temperature.ipynb"  # the kernel's notebook, as JupyterLab names it
    notebook.write_text((progress.release_dir() / "02_temperature.ipynb").read_text())
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(tmp_path / "progress.json"), JPY_SESSION_NAME=str(notebook))
    env.pop("NBGRADER_EXECUTION", None)
    running = Kernel(env)
    running.run("import torch\nfrom lmpolicy.notebook import checks")
    yield running
    running.close()


SAMPLER_CELL = "task2__sample_with_temperature"  # the answer cell's id in the release notebook
CHECK_CELL = "import torch\nfrom lmpolicy.notebook import checks\nchecks.call_student(sample_with_temperature, torch.tensor([1.0, 0.0]), " \
             "temperature=0, generator=torch.Generator())\nchecks.done('task2')"
DIVIDES_BY_T = ("def sample_with_temperature(logits, temperature, generator=None):\n"
                "    scaled = logits / temperature\n"
                "    probs = torch.exp(scaled - scaled.max())\n"
                "    return torch.multinomial(probs / probs.sum(), 1, generator=generator)\n")
GREEDY_AT_ZERO = ("def sample_with_temperature(logits, temperature, generator=None):\n"
                  "    if temperature == 0:\n"
                  "        return logits.argmax(-1, keepdim=True)\n"
                  "    probs = torch.softmax(logits / temperature, -1)\n"
                  "    return torch.multinomial(probs, 1, generator=generator)\n")


def test_an_error_in_the_students_function_shows_the_call_and_the_students_lines_only(kernel):
    kernel.run(DIVIDES_BY_T, cell_id=SAMPLER_CELL)
    _, error = kernel.run(CHECK_CELL)
    assert error["ename"] == "StudentCodeRaised"
    shown = [ANSI.sub("", line) for line in error["traceback"]]
    assert len(shown) <= 8 and not any("Traceback" in line for line in shown)
    frame = next(i for i, line in enumerate(shown) if line.startswith("  In ["))
    assert one_verdict(shown[:frame]).startswith(
        "\u2717 Your code raised an error: sample_with_temperature(tensor([1., 0.]), temperature=0, "
        "generator=<Generator>) raised RuntimeError: probability tensor")
    # the student's line that raised, named by its cell; nothing from lmpolicy or torch
    assert "torch.multinomial(probs / probs.sum()" in one_line(shown[frame:])
    assert not any("checks.py" in line or "site-packages" in line for line in shown)


def test_a_check_cell_records_failing_with_its_reason_then_passed_then_changed(kernel, tmp_path):
    kernel.run(DIVIDES_BY_T, cell_id=SAMPLER_CELL)
    kernel.run(CHECK_CELL)
    data = json.loads((tmp_path / "progress.json").read_text())
    (run,) = data["checks"]["task2"].values()
    assert run["state"] == "failing" and "raised RuntimeError" in run["reason"] and data["done"] == {}

    kernel.run(GREEDY_AT_ZERO, cell_id=SAMPLER_CELL)
    printed, error = kernel.run(CHECK_CELL)
    assert error is None and "\u2713 Lab Task 2 passed the visible checks" in printed
    data = json.loads((tmp_path / "progress.json").read_text())
    (run,) = data["checks"]["task2"].values()
    assert run["state"] == "passed" and "task2" in data["done"]
    assert run["answer"] == {SAMPLER_CELL: progress.fingerprint(GREEDY_AT_ZERO)}

    kernel.run(GREEDY_AT_ZERO + "\n", cell_id=SAMPLER_CELL)  # the same code again: still passed
    assert "task2" in json.loads((tmp_path / "progress.json").read_text())["done"]
    kernel.run(DIVIDES_BY_T, cell_id=SAMPLER_CELL)  # the answer changed; its check has not run on it
    data = json.loads((tmp_path / "progress.json").read_text())
    (run,) = data["checks"]["task2"].values()
    assert run["state"] == "changed" and data["done"] == {}


def test_a_cell_that_fails_after_done_counts_as_failing(kernel, tmp_path):
    kernel.run("checks.done('task3')\nchecks.check(False, 'a later check failed')")
    data = json.loads((tmp_path / "progress.json").read_text())
    (run,) = data["checks"]["task3"].values()
    assert run == {**run, "state": "failing", "reason": "Check failed: a later check failed"} and data["done"] == {}


def release_cell(notebook: str, grade_id: str) -> str:
    import nbformat

    cells = nbformat.read(progress.release_dir() / f"{notebook}.ipynb", as_version=4).cells
    return next(c.source for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def test_summary_lists_each_graded_item_of_the_notebook_with_its_state(kernel):
    # the release's stub and its visible check, as a student first runs them
    kernel.run(release_cell("02_temperature", "task2__setup"))
    kernel.run(release_cell("02_temperature", SAMPLER_CELL), cell_id=SAMPLER_CELL)
    _, error = kernel.run(release_cell("02_temperature", "task2__tests"))
    assert error["ename"] == "StudentCodeRaised"
    printed, error = kernel.run("checks.summary('02_temperature')")
    assert error is None
    lines = printed.strip().splitlines()
    assert lines[0] == "02_temperature: 0 of 7 items done (0 of 16 points)"
    assert lines[1].startswith("\u2717 Lab Task 2 visible check")
    assert "Check failed: your function sample_with_temperature is not written yet" in lines[1]
    assert lines[2].startswith("\u00b7 Exercise 02.top-k visible check") and lines[2].endswith("not attempted")
    assert any(line.startswith("\u00b7 Exercise 11.2(a) written answer") and line.endswith("still empty") for line in lines)


def test_summary_under_the_grader_prints_only_a_note(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    checks.summary("01_policy_softmax")
    assert capsys.readouterr().out.strip() == \
        "(the summary of your checks appears when you run this cell yourself, not under nbgrader)"


def test_a_check_run_before_its_answer_cell_says_which_cell_to_run_and_nothing_else(kernel):
    """A kernel restarted (or a check cell run first): the check's NameError is one ✗ line (wrapped between words),
    the answer cell to run, without IPython's traceback through the check's code."""
    _, error = kernel.run(CHECK_CELL)
    assert error["ename"] == "NameError" and error["evalue"] == "name 'sample_with_temperature' is not defined"
    shown = [ANSI.sub("", line) for line in error["traceback"]]
    assert one_verdict(shown) == ("\u2717 Not defined yet: sample_with_temperature is defined in Lab Task 2's answer "
                                  "cell, which has not run in this kernel: run it first. After a restart (or to be "
                                  "sure), Run \u25b8 Run All Above runs every cell above this one.")
    kernel.run(GREEDY_AT_ZERO, cell_id=SAMPLER_CELL)
    printed, error = kernel.run(CHECK_CELL)
    assert error is None and "\u2713 Lab Task 2 passed the visible checks" in printed


def test_a_misspelt_name_gets_the_name_it_was_probably_meant_to_be(kernel):
    """In the student's own cell IPython's traceback stays: it shows the line with the misspelt name."""
    kernel.run("temperature_grid = [0.5, 1.0]")
    _, error = kernel.run("x = 1\nprint(temprature_grid)")
    shown = [ANSI.sub("", line) for line in error["traceback"]]
    advice = next(i for i, line in enumerate(shown) if line.startswith("\u2717"))
    assert one_verdict(shown[advice:]) == ("\u2717 Not defined yet: nothing in this notebook defines "
                                           "temprature_grid; did you mean temperature_grid?")
    assert any("print(temprature_grid)" in line for line in shown[:advice]), shown


def test_a_check_cell_missing_a_name_says_so_and_nothing_else(kernel):
    """A check cell calling a function the notebook never defines (the student renamed it): the advice alone;
    the traceback would show the check's code, not the student's."""
    _, error = kernel.run(CHECK_CELL.replace("sample_with_temperature", "sample_with_temperatur"))
    assert one_verdict([ANSI.sub("", line) for line in error["traceback"]]) == (
        "\u2717 Not defined yet: nothing in this notebook defines sample_with_temperatur; "
        "did you mean sample_with_temperature?")


def save_cell(notebook, grade: str, source: str) -> None:
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade).source = source
    nbformat.write(nb, notebook)


def test_a_restart_never_takes_away_the_pass_of_an_unchanged_answer(kernel, tmp_path):
    """The check passes, the student saves and restarts the kernel, then runs the check first: it says "Not defined
    yet" and judged nothing, so the pass stays, on the record and in the summary, for the answer as saved."""
    import os

    notebook = tmp_path / "02_temperature.ipynb"
    save_cell(notebook, "task2__tests", CHECK_CELL)  # the check cell as the notebook holds it
    kernel.run(GREEDY_AT_ZERO, cell_id=SAMPLER_CELL)
    kernel.run(CHECK_CELL)
    save_cell(notebook, SAMPLER_CELL, GREEDY_AT_ZERO)
    kernel.close()
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(tmp_path / "progress.json"), JPY_SESSION_NAME=str(notebook))
    env.pop("NBGRADER_EXECUTION", None)
    restarted = Kernel(env)
    try:
        _, error = restarted.run(CHECK_CELL)  # the first cell after the restart: it imports the checks itself
        assert error["ename"] == "NameError"
        shown = [ANSI.sub("", line) for line in error["traceback"]]
        assert one_verdict(shown).startswith("\u2717 Not defined yet: sample_with_temperature is defined in Lab Task 2's")
        data = json.loads((tmp_path / "progress.json").read_text())
        (run,) = data["checks"]["task2"].values()
        assert run["state"] == "passed" and "task2" in data["done"]
        printed, _ = restarted.run("from lmpolicy.notebook import checks\nchecks.summary('02_temperature')")
        line = next(line for line in printed.splitlines() if "Lab Task 2 visible check" in line)
        assert line.startswith("\u2713") and line.endswith("passed"), line
    finally:
        restarted.close()


def test_a_check_run_before_its_answer_is_recorded_in_the_checks_own_words(kernel, tmp_path):
    """No pass to keep: the start page and the summary say what the check said, never "failing: NameError"."""
    save_cell(tmp_path / "02_temperature.ipynb", "task2__tests", CHECK_CELL)
    kernel.run(CHECK_CELL)
    (run,) = json.loads((tmp_path / "progress.json").read_text())["checks"]["task2"].values()
    said = ("Not defined yet: sample_with_temperature is defined in Lab Task 2's answer cell, which has not run in "
            "this kernel: run it first.")
    assert run["state"] == "failing" and run["reason"] == said
    printed, _ = kernel.run("checks.summary('02_temperature')")
    line = next(line for line in printed.splitlines() if "Lab Task 2 visible check" in line)
    assert line.endswith(said) and "NameError" not in printed


def test_a_check_cell_is_known_by_the_notebooks_test_cell_without_a_done_call(kernel, tmp_path):
    """A check cell that calls an exercise's check module (no ``done("key")`` in its code) is recorded as its
    notebook's test cell says, failing in the check's words, whether the front end sends the cell's id or not."""
    import nbformat

    notebook = tmp_path / "02_temperature.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "task2__tests")
    test.source = ("from lmpolicy.notebook import checks\nchecks.check(kept_right, 'top-k kept the wrong tokens')\n"
                   "getattr(checks, 'done')('task2')  # as a check module calls it")
    nbformat.write(nb, notebook)
    kernel.run("kept_right = False")
    kernel.run(test.source)  # nbclient sends no cell id: known by its code
    (run,) = json.loads((tmp_path / "progress.json").read_text())["checks"]["task2"].values()
    assert run["state"] == "failing" and run["reason"] == "Check failed: top-k kept the wrong tokens"
    kernel.run("kept_right = True")
    kernel.run(test.source, cell_id=test.id)  # JupyterLab sends it: known by its id
    data = json.loads((tmp_path / "progress.json").read_text())
    (run,) = data["checks"]["task2"].values()
    assert run["state"] == "passed" and "task2" in data["done"]


@pytest.fixture
def kernel_without_a_notebook(tmp_path):
    """A kernel no front end named a notebook for (nbclient, another editor): no JPY_SESSION_NAME."""
    import os

    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(tmp_path / "progress.json"))
    for variable in ("NBGRADER_EXECUTION", "JPY_SESSION_NAME"):
        env.pop(variable, None)
    running = Kernel(env)
    running.run("import torch\nfrom lmpolicy.notebook import checks")
    yield running
    running.close()


def test_a_check_module_s_cell_is_recorded_where_the_kernel_knows_no_notebook(kernel_without_a_notebook, tmp_path):
    """The declaration says which exercise the cell checks before its checks run: a failure is recorded against it,
    and a check cell that reads the answers from its globals() is never judged as the student's code."""
    kernel = kernel_without_a_notebook
    kernel.run("def softmax(logits, dim=-1):\n    return torch.exp(logits) / torch.exp(logits).sum(dim=dim, keepdim=True)")
    printed, error = kernel.run("# Checks of Exercise 01.softmax\nfrom lmpolicy.exercises import nb01\n"
                                "nb01.SOFTMAX.check(softmax)")
    assert error is not None
    (run,) = json.loads((tmp_path / "progress.json").read_text())["checks"]["nb01_softmax"].values()
    assert run["state"] == "failing" and "NaN" in run["reason"], run
    kernel.run("def softmax(logits, dim=-1):\n    shifted = logits - logits.max(dim=dim, keepdim=True).values\n"
               "    return torch.exp(shifted) / torch.exp(shifted).sum(dim=dim, keepdim=True)")
    printed, error = kernel.run("# Checks of Exercise 01.softmax\nfrom lmpolicy.exercises import nb01\n"
                                "nb01.SOFTMAX.check(softmax)")
    assert error is None and "passed the visible checks" in printed
    assert "nb01_softmax" in json.loads((tmp_path / "progress.json").read_text())["done"]
    kernel.run("beta_equal_mass, true_reward_at_beta_0_1 = 0.5, 0.7")
    printed, _ = kernel.run("# Checks of Exercise 11.8(b)\nfrom lmpolicy.exercises import nb05\n"
                            "nb05.BETA_EQUAL_MASS.check(globals())")
    assert "globals" not in printed, printed
