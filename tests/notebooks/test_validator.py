"""nbgrader's Validate as the course configures it (lmpolicy.notebook.validator): every source notebook passes; every
release notebook fails exactly its graded cells, each named by its exercise and shown as its short ✗ verdict;
`nbgrader validate` prints that too, wherever a student runs it."""
import os
import re
import subprocess
import sys

import nbformat
import pytest

from lmpolicy.notebook import progress
from lmpolicy.notebook.validator import VerdictValidator

from .notebook_tools import (NOTEBOOK_NAMES, RELEASE_DIR, ROOT, SOURCE_DIR, grade_id, is_autograded_test,
                             is_manual_answer, read)
from tests.verdicts import one_line

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAX_VERDICT_LINES = 8  # a failed check renders as at most 8 lines (lmpolicy.notebook.checks.MAX_SHOWN_LINES)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not NOTEBOOK_NAMES, reason="no source notebooks yet")]


def validate(path, monkeypatch, tmp_path):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "progress.json"))
    return VerdictValidator().validate(str(path))


def cell_name(label: str, kind: str, title: str = "") -> re.Pattern:
    """What Validate calls a graded cell: its exercise's label (the start page's and the headers'), the
    exercise's title where the notebook gives one, and the cell's kind."""
    return re.compile(re.escape(label + (f" ({title})" if title else "") + f", {kind}"))


def named(key: str, kind: str) -> re.Pattern:
    exercise = progress.exercise(key)
    return cell_name(exercise.label, kind, exercise.title or "")


def expected_name(cell) -> re.Pattern:
    exercise = progress.exercise(progress.exercise_key(grade_id(cell)))
    return cell_name(exercise.label, "the written answer" if is_manual_answer(cell) else "the check cell",
                     exercise.title or "")


# Notebook 08 trains for minutes under Validate; that its source passes every check under the grader and as a
# student runs it is test_execution's. The Validator's "nothing failed" is shown on the other seven.
@pytest.mark.parametrize("name", [name for name in NOTEBOOK_NAMES if name != "08_tinylm_reinforce"])
def test_source_notebook_passes_validation(name, monkeypatch, tmp_path):
    results = validate(SOURCE_DIR / f"{name}.ipynb", monkeypatch, tmp_path)
    assert results == {}, f"{name}: {[r.get('raw_error', r)[:500] for r in results.get('failed', [])]}"
    assert not (tmp_path / "progress.json").exists()


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_release_notebook_fails_each_graded_cell_by_its_exercise_with_a_short_verdict(name, monkeypatch, tmp_path):
    """The stubs fail every autograded test cell with a friendly check; the manual cells are unanswered."""
    release = RELEASE_DIR / f"{name}.ipynb"
    results = validate(release, monkeypatch, tmp_path)
    assert set(results) == {"failed"}, f"{name}: unexpected validator result {sorted(results)}"
    graded = [cell for cell in read(release).cells if is_autograded_test(cell) or is_manual_answer(cell)]
    names = [failure["source"] for failure in results["failed"]]
    assert len(names) == len(graded) and all(expected_name(c).fullmatch(n) for c, n in zip(graded, names)), (
        f"{name}: the failing cells {names} are not exactly the graded cells {[grade_id(c) for c in graded]}")
    for failure, cell in zip(results["failed"], graded):
        error = ANSI.sub("", failure["raw_error"])
        if is_manual_answer(cell):
            assert error == "You did not provide a response.", f"{name}: a manual answer cell fails with {error}"
            continue
        lines = error.splitlines()
        assert lines[0].startswith("\u2717 "), f"{grade_id(cell)}'s verdict does not start with a \u2717 line: {error}"
        assert len(lines) <= MAX_VERDICT_LINES and "Traceback" not in error, f"{grade_id(cell)}: {error}"
        assert not set(cell.source.splitlines()) & set(lines), f"{grade_id(cell)}'s verdict shows its source"


def wrong_softmax_notebook(folder):
    """Release notebook 01 with a softmax that skips the max shift, as a student saves it."""
    from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS, Kind

    (pitfall,) = [w for w in WRONG_ANSWERS if w.cell == "nb01_softmax__answer" and w.kind == Kind.PITFALL
                  and w.names == "subtract the maximum"]
    nb = nbformat.read(RELEASE_DIR / "01_policy_softmax.ipynb", as_version=4)
    next(c for c in nb.cells if grade_id(c) == pitfall.cell).source = pitfall.source
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / "01_policy_softmax.ipynb")
    return nb, pitfall


def test_validate_command_shows_the_failing_checks_by_exercise_and_no_test_source(tmp_path):
    """`nbgrader validate` as a student runs it in a terminal of `make lab`: in the folder of their copy, with
    the student's Jupyter config on JUPYTER_CONFIG_PATH."""
    folder = ROOT / "test-artifacts" / "validate-command" / "ch11"  # inside the course, as work/ch11 is
    nb, pitfall = wrong_softmax_notebook(folder)
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(tmp_path / "progress.json"),
               JUPYTER_CONFIG_PATH=str(ROOT / "jupyter-config" / "student"))
    result = subprocess.run([sys.executable, "-m", "nbgrader", "validate", "01_policy_softmax.ipynb"], cwd=folder,
                            env=env, capture_output=True, text=True, timeout=600)
    out = ANSI.sub("", result.stdout)
    assert "VALIDATION FAILED ON 3 CELL(S)" in out, out + result.stderr[-2000:]
    sections = [part.strip() for part in out.split("=" * 90)[1:]]
    headings = [section.splitlines()[0] for section in sections]
    expected = [named("nb01_softmax", "the check cell"), named("ex11_1a", "the check cell"),
                named("ex11_1b", "the written answer")]
    assert len(headings) == 3 and all(e.fullmatch(h.removesuffix(":")) for e, h in zip(expected, headings)), out
    softmax = one_line(sections[0].splitlines()[1:])
    assert softmax.startswith("\u2717 Check failed: softmax(torch.tensor([1000., 999., 998.])) contains NaN"), out
    assert pitfall.names in softmax, out
    assert "\u2717 Check failed: your function sequence_logprob is not written yet" in sections[1], out
    test_source = {line.strip() for cell in nb.cells if is_autograded_test(cell)
                   for line in cell.source.splitlines() if line.strip()}
    assert not [line for line in out.splitlines() if line.strip() in test_source], out
    assert "Traceback" not in out and "checks.py" not in out and "..." not in out, out
    assert len([line for line in out.splitlines() if line.strip()]) <= 16, out


def test_validate_names_the_cell_that_raised_before_defining_what_a_check_needs(monkeypatch, tmp_path):
    """Validate runs the notebook from the top: a check's NameError means the answer cell raised first."""
    nb = nbformat.read(RELEASE_DIR / "01_policy_softmax.ipynb", as_version=4)
    answer = next(c for c in nb.cells if grade_id(c) == "nb01_softmax__answer")
    answer.source = "raise ValueError('not ready')\n" + answer.source
    nbformat.write(nb, tmp_path / "01_policy_softmax.ipynb")
    results = validate(tmp_path / "01_policy_softmax.ipynb", monkeypatch, tmp_path)
    first = results["failed"][0]
    assert named("nb01_softmax", "the check cell").fullmatch(first["source"]), first["source"]
    assert ANSI.sub("", first["raw_error"]) == (
        "\u2717 NameError: name 'softmax' is not defined: the cell above that defines softmax raised ValueError "
        "before it got there (its error is in its output)")


def _parameters_notebook(path, saved_for: str | None):
    """A notebook of one varying exercise's parameters cell, saved as it ran for the id ``saved_for``."""
    from lmpolicy.per_student import variants
    cell = nbformat.v4.new_code_cell('from lmpolicy.per_student import variants\nvariants.show("ex11_2b")')
    cell.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True, "grade_id": "ex11_2b__parameters",
                                 "schema_version": 3}
    text = variants.describe("ex11_2b", saved_for)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": text,  # as IPython saves Markdown
                                                                 "text/plain": "<IPython.core.display.Markdown object>"})]
    notebook = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {"name": "python3", "language": "python",
                                                                               "display_name": "Python 3"}})
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("saved_for, here, says", [
    ("alice", "bob", "belong to student id 'alice', but here your id is 'bob'"),
    (None, "bob", "belong to the chapter (no student id), but here your id is 'bob'"),
    ("alice", None, "belong to student id 'alice', but here no student id is set"),
])
def test_validate_warns_when_the_saved_numbers_belong_to_another_id(saved_for, here, says, monkeypatch, tmp_path):
    if here is None:
        monkeypatch.delenv("LMPOLICY_STUDENT_ID", raising=False)
    else:
        monkeypatch.setenv("LMPOLICY_STUDENT_ID", here)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv("LMPOLICY_VARIANTS", raising=False)
    results = validate(_parameters_notebook(tmp_path / "mine.ipynb", saved_for), monkeypatch, tmp_path)
    (first,) = results["failed"]
    assert first["source"] == "Your own numbers" and says in first["raw_error"], first
    assert "alice" not in first["raw_error"] or saved_for == "alice"


def test_validate_says_nothing_of_numbers_saved_for_this_very_id(monkeypatch, tmp_path):
    monkeypatch.setenv("LMPOLICY_STUDENT_ID", "alice")
    monkeypatch.delenv("LMPOLICY_VARIANTS", raising=False)
    assert validate(_parameters_notebook(tmp_path / "mine.ipynb", "alice"), monkeypatch, tmp_path) == {}


def test_a_kernel_that_dies_as_it_starts_is_replaced_and_the_notebook_validated(monkeypatch, tmp_path):
    """CI saw Validate's kernel die on "Address already in use" (a port taken by another kernel starting at that
    moment): the dialog showed jupyter_client's traceback instead of the verdicts. Here the first kernel started dies
    the same way, before it answers, and the second one runs."""
    import json

    spec = tmp_path / "data" / "kernels" / "python3"  # the notebook's kernel, found here first
    spec.mkdir(parents=True)
    first = tmp_path / "first-start-done"
    starter = tmp_path / "start_kernel.py"
    starter.write_text(f"import os, runpy, sys\nif not os.path.exists({str(first)!r}):\n"
                       f"    open({str(first)!r}, 'w').close()\n    sys.exit('Address already in use')\n"
                       "runpy.run_module('ipykernel_launcher', run_name='__main__')\n")
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, str(starter), "-f", "{connection_file}"], "display_name": "Python 3",
        "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "data"))  # searched before every other kernel folder
    wrong_softmax_notebook(tmp_path / "work")
    results = validate(tmp_path / "work" / "01_policy_softmax.ipynb", monkeypatch, tmp_path)
    assert first.exists(), "the first kernel never started"
    softmax = results["failed"][0]
    assert named("nb01_softmax", "the check cell").fullmatch(softmax["source"]), softmax
    assert ANSI.sub("", softmax["raw_error"]).startswith("\u2717 Check failed: softmax("), softmax
