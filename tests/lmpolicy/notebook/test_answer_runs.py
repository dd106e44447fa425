"""lmpolicy.notebook.answer_runs in a real kernel: a check refuses an answer left by a run of its cell that raised,
and judges it again once the cell ran through; under the grader nothing changes."""
import json
import math
import re

import pytest

from lmpolicy.notebook import progress
from tests.lmpolicy.notebook.test_checks import ANSI, Kernel, one_verdict

NOTEBOOK = "01_policy_softmax"
CHAPTER_PROBS = (0.665, 0.08, 0.97)  # the chapter's token probabilities of "86<eos>", which variants replace


def release_cell(grade_id: str):
    import nbformat

    cells = nbformat.read(progress.release_dir() / f"{NOTEBOOK}.ipynb", as_version=4).cells
    return next(c for c in cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def numbers_cell(prob: str) -> str:
    return f"prob_86 = {prob}\nlogprob_86 = math.log(prob_86)\nmain_contributor = '6'\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("answer-runs")


@pytest.fixture(scope="module")
def kernel(folder):
    """One kernel for the module (each test uses its own exercise's names): notebook 01's set-up, its 11.1(a)
    parameters and a sequence_logprob run."""
    import os

    notebook = folder / f"{NOTEBOOK}.ipynb"  # the kernel's notebook, as JupyterLab names it
    notebook.write_text((progress.release_dir() / f"{NOTEBOOK}.ipynb").read_text())
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(folder / "progress.json"), JPY_SESSION_NAME=str(notebook),
               LMPOLICY_STUDENT_ID="alice")
    for variable in ("NBGRADER_EXECUTION", "LMPOLICY_VARIANTS"):
        env.pop(variable, None)
    running = Kernel(env)
    running.run("import math\nimport torch\nfrom lmpolicy.notebook import checks")
    parameters = release_cell("ex11_1a__parameters")
    running.run(parameters.source, cell_id=parameters.id)
    running.run("def sequence_logprob(token_probs):\n    return token_probs.log().sum(dim=-1)",
                cell_id="ex11_1a__sequence_logprob")
    yield running
    running.close()


def verdict(error) -> str:
    return one_verdict([ANSI.sub("", line) for line in error["traceback"]])


def check_11_1a(kernel):
    check = release_cell("ex11_1a__tests")
    return kernel.run(check.source, cell_id=check.id)


def test_a_check_after_its_answer_cell_raised_says_so_and_judges_nothing(kernel, folder):
    """11.1(a): the chapter's number from an earlier run, then the answer cell raises: the check names the variable
    and the error instead of "this is the chapter's value", records no pass, and judges again once the cell runs."""
    kernel.run(numbers_cell(" * ".join(map(str, CHAPTER_PROBS))), cell_id="ex11_1a__numbers")
    _, error = check_11_1a(kernel)
    assert "chapter" in verdict(error)  # judged: the value is the chapter's, not the student's own

    kernel.run(numbers_cell("token_probs_86.product()"), cell_id="ex11_1a__numbers")  # raises AttributeError
    _, error = check_11_1a(kernel)
    assert error["ename"] == "LeftOver"
    assert re.sub(r"In \[\d+\]", "In [n]", verdict(error)) == (
        "\u2717 Not checked: prob_86, logprob_86 and main_contributor are left from an earlier run: their cell "
        "(In [n]) raised AttributeError: 'Tensor' object has no attribute 'product' the last time it ran. "
        "Fix that cell and run it again, then this check.")
    assert "chapter" not in verdict(error)
    (run,) = json.loads((folder / "progress.json").read_text())["checks"]["ex11_1a"].values()
    assert run["state"] == "failing" and run["reason"].startswith("Not checked: prob_86, logprob_86 and")

    # a cell that raises without binding the answers leaves them judged
    kernel.run("print(token_probs_86.product())")
    assert verdict(check_11_1a(kernel)[1]).startswith("\u2717 Not checked: prob_86")  # still that cell's last run

    kernel.run(numbers_cell("token_probs_86.prod().item()"), cell_id="ex11_1a__numbers")
    kernel.run("print(token_probs_86.product())")
    printed, error = check_11_1a(kernel)
    assert error is None and "\u2713 Exercise 11.1(a) passed the visible checks" in printed
    assert "ex11_1a" in json.loads((folder / "progress.json").read_text())["done"]


def test_an_answer_set_before_its_cell_raised_is_not_judged_either(kernel):
    """The release's cell sets prob_86 = None first: a later line that raises leaves None from this very run, and
    the check says the cell raised, not that the answer is a stub."""
    kernel.run("prob_86 = None\nlogprob_86 = None\nmain_contributor = None\nprob_86 = token_probs_86.product()",
               cell_id="ex11_1a__numbers")
    _, error = check_11_1a(kernel)
    said = verdict(error)
    assert said.startswith("\u2717 Not checked: prob_86, logprob_86 and main_contributor were set by a run of their "
                           "cell (In ["), said
    assert "that then raised AttributeError: 'Tensor' object has no attribute 'product'." in said
    assert "stub" not in said


def test_a_function_whose_cell_no_longer_parses_is_not_judged(kernel):
    """A def edited into a syntax error runs nothing: the old function is left, and the check says so (the names a
    cell that does not parse binds are those of its last version that did, by its cell id)."""
    kernel.run("def softmax(logits, dim=-1):\n    shifted = logits - logits.max(dim=dim, keepdim=True).values\n"
               "    return shifted.exp() / shifted.exp().sum(dim=dim, keepdim=True)", cell_id="nb01_softmax__answer")
    check = release_cell("nb01_softmax__tests")
    assert kernel.run(check.source, cell_id=check.id)[1] is None
    kernel.run("def softmax(logits, dim=-1):\n    return (logits.exp() / logits.exp().sum(dim=dim, keepdim=True)",
               cell_id="nb01_softmax__answer")
    _, error = kernel.run(check.source, cell_id=check.id)
    said = verdict(error)
    assert said.startswith("\u2717 Not checked: softmax is left from an earlier run: its cell (In ["), said
    assert "raised SyntaxError: " in said and said.endswith("Fix that cell and run it again, then this check.")


def test_answers_read_by_name_are_refused_alike(kernel):
    """A check that reads its answers by name from globals() (``exercise.numbers``): the same refusal."""
    kernel.run("beta_equal_mass, true_reward_at_beta_0_1 = 0.5, 0.7")
    kernel.run("beta_equal_mass = beta_from_the_demo")  # NameError: the earlier 0.5 is left
    _, error = kernel.run("from lmpolicy.exercises import nb05\nnb05.BETA_EQUAL_MASS.check(globals())")
    said = verdict(error)
    assert said.startswith("\u2717 Not checked: beta_equal_mass is left from an earlier run: its cell (In ["), said
    assert "raised NameError: name 'beta_from_the_demo' is not defined the last time it ran" in said


def test_under_the_grader_the_check_judges_what_the_namespace_holds(kernel):
    """nbgrader runs every cell in order (NBGRADER_EXECUTION set): there the check reads the namespace as it is, as
    before, even after a cell that raised."""
    kernel.run(numbers_cell(" * ".join(map(str, CHAPTER_PROBS))), cell_id="ex11_1a__numbers")
    kernel.run("import os\nos.environ['NBGRADER_EXECUTION'] = 'validate'")
    try:
        kernel.run(numbers_cell("token_probs_86.product()"), cell_id="ex11_1a__numbers")
        _, error = check_11_1a(kernel)
    finally:
        kernel.run("del os.environ['NBGRADER_EXECUTION']")
    assert error["ename"] == "CheckFailed" and "chapter" in verdict(error), verdict(error)


@pytest.fixture
def notebook_put_back(folder):
    """The kernel's notebook, put back as it was after the test."""
    notebook = folder / f"{NOTEBOOK}.ipynb"
    saved = notebook.read_text()
    yield notebook
    notebook.write_text(saved)


WRITTEN = "The <eos> token: its log-prob is the largest in size."
SAID_WHEN_SAVED = ("\u270e Exercise 11.1(b): written (graded by hand): your answer is in its cell (saved just now), "
                   "for your instructor to grade")


def mark_done_while_jupyterlab_saves(kernel, notebook, save) -> tuple[str, list[str]]:
    """Run ``mark_done`` in the kernel; when its script arrives, play JupyterLab: ``save(text)`` writes the notebook
    with the written answer typed in. What it printed, and the scripts it showed."""
    import nbformat

    code = "checks.mark_done('ex11_1b')"
    message = kernel.client.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                                            "user_expressions": {}, "allow_stdin": False})
    kernel.client.shell_channel.send(message)
    printed, scripts = [], []
    while True:
        reply = kernel.client.get_iopub_msg(timeout=60)
        if reply["parent_header"].get("msg_id") != message["header"]["msg_id"]:
            continue
        if reply["msg_type"] == "display_data" and "application/javascript" in reply["content"]["data"]:
            scripts.append(reply["content"]["data"]["application/javascript"])
            typed = nbformat.read(notebook, as_version=4)
            next(c for c in typed.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ex11_1b__manual"
                 ).source = WRITTEN
            save(nbformat.writes(typed))
        elif reply["msg_type"] == "stream":
            printed.append(reply["content"]["text"])
        elif reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
            break
    return "".join(printed).strip(), scripts


def test_mark_done_asks_jupyterlab_to_save_and_reads_what_the_student_typed(kernel, notebook_put_back):
    """mark_done shows the script that presses JupyterLab's save key, then reads the file once it changed."""
    said, scripts = mark_done_while_jupyterlab_saves(kernel, notebook_put_back, notebook_put_back.write_text)
    assert len(scripts) == 1 and "keydown" in scripts[0] and "keyCode: 83" in scripts[0]
    assert said == SAID_WHEN_SAVED


def test_mark_done_reads_the_notebook_once_the_server_has_written_it_whole(kernel, notebook_put_back):
    """Jupyter's server writes a notebook in place: the file changes when its first bytes are written. mark_done
    waits until it reads whole (CI saw a JSONDecodeError from a notebook read half written)."""
    import time

    def in_place_in_two_halves(text):
        with open(notebook_put_back, "w") as file:
            file.write(text[:len(text) // 2])
            file.flush()
            time.sleep(1.0)
            file.write(text[len(text) // 2:])

    said, _ = mark_done_while_jupyterlab_saves(kernel, notebook_put_back, in_place_in_two_halves)
    assert said == SAID_WHEN_SAVED


def test_mark_done_says_what_to_do_when_nothing_saved_the_notebook(kernel):
    """No front end saved the notebook (the script ran nowhere): after its short wait, mark_done says the answer it
    read is the notebook as last saved, and how to save it."""
    printed, _ = kernel.run("from lmpolicy.notebook import save_request\nsave_request.WAIT_SECONDS, waited = 0.5, "
                            "save_request.WAIT_SECONDS\ntry:\n    checks.mark_done('ex11_1b')\nfinally:\n"
                            "    save_request.WAIT_SECONDS = waited")
    assert printed.strip() == ("Exercise 11.1(b): the answer cell still holds its placeholder (as last saved): write "
                               "your answer there, save the notebook (Ctrl+S, or Cmd+S on a Mac), then run this cell "
                               "again; the start page counts it once saved")


def test_the_cell_that_raised_just_before_the_first_check_of_the_kernel_is_known(folder):
    """The watch begins with the kernel's first check: the answer cell that raised just before it is still known
    (IPython keeps the last run's result), so the check says so rather than judge what an earlier run left."""
    import os

    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(folder / "progress-fresh.json"), LMPOLICY_STUDENT_ID="alice",
               JPY_SESSION_NAME=str(folder / f"{NOTEBOOK}.ipynb"))
    for variable in ("NBGRADER_EXECUTION", "LMPOLICY_VARIANTS"):
        env.pop(variable, None)
    fresh = Kernel(env)
    try:
        parameters = release_cell("ex11_1a__parameters")
        fresh.run("import math\nimport torch\n" + parameters.source, cell_id=parameters.id)
        fresh.run("def sequence_logprob(token_probs):\n    return token_probs.log().sum(dim=-1)")
        fresh.run(numbers_cell(" * ".join(map(str, CHAPTER_PROBS))), cell_id="ex11_1a__numbers")
        fresh.run(numbers_cell("token_probs_86.product()"), cell_id="ex11_1a__numbers")
        assert "lmpolicy.notebook.checks" not in fresh.run("import sys\nprint(sorted(sys.modules))")[0]
        fresh.run(numbers_cell("token_probs_86.product()"), cell_id="ex11_1a__numbers")  # the run just before
        said = verdict(check_11_1a(fresh)[1])
        assert said.startswith("\u2717 Not checked: prob_86, logprob_86 and main_contributor may be left from an "
                               "earlier run: their cell (In ["), said
        assert "raised AttributeError: 'Tensor' object has no attribute 'product' the last time it ran" in said
    finally:
        fresh.close()
