"""notebooks/00_start_here.ipynb runs, links to the student's copy and shows the progress table, which
never says "passed" for an answer other than the one that passed."""
import html as html_text
import json
import re
import shutil

import nbformat
import pytest

from lmpolicy.notebook import progress

from .notebook_tools import ROOT, RELEASE_DIR, client, execute, grade_id, kernel_env, read, run_cell

START_HERE = ROOT / "notebooks" / "00_start_here.ipynb"


def test_start_here_is_committed_without_outputs():
    for cell in read(START_HERE).cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_start_here_links_every_notebook_of_the_students_copy_as_a_link_not_as_code():
    text = "\n".join(cell.source for cell in read(START_HERE).cells if cell.cell_type == "markdown")
    # the page is opened as the student's copy, work/00_start_here.ipynb (`make lab`), beside work/ch11/
    links = re.findall(r"\[([^\]]*)\]\((ch11/[^)]+\.ipynb)\)", text)
    assert sorted(target for _, target in links) == [f"ch11/{path.name}" for path in sorted(RELEASE_DIR.glob("*.ipynb"))]
    beside = re.findall(r"\]\(([^)/]+\.ipynb)\)", text)  # the demos and the study, copied beside it
    assert sorted(set(beside)) == sorted(path.name for path in (ROOT / "notebooks").glob("*.ipynb")
                                         if path.name != START_HERE.name)
    every_link = re.findall(r"\[([^\]]*)\]\([^)]+\.ipynb\)", text)
    assert every_link and not [name for name in every_link if "`" in name], \
        "a link text in backquotes renders as code, not as a link"
    assert "copy that folder" not in text.lower()


def html_of(nb) -> str:
    return "".join(output.get("data", {}).get("text/html", "") for cell in nb.cells if cell.cell_type == "code"
                   for output in cell.outputs).replace(' style="text-align:left"', "")


def row_of(html: str, label: str) -> str:
    """The table row whose first cell is ``label``."""
    return re.search(rf"<tr><td>{re.escape(label)}</td>.*?</tr>", html).group(0)


def graded_cells(name: str) -> list:
    return [c for c in read(RELEASE_DIR / f"{name}.ipynb").cells if c.metadata.get("nbgrader", {}).get("grade")]


def points_of(cells) -> str:
    return f"{sum(float(c.metadata['nbgrader']['points']) for c in cells):g}"


@pytest.mark.slow
def test_start_here_shows_each_graded_item_with_its_state_and_the_totals(tmp_path, monkeypatch):
    copy = tmp_path / "work" / "ch11"
    shutil.copytree(RELEASE_DIR, copy)
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(copy))
    # the student wrote 11.1(b) and ran the visible check of 11.3(b), which passed
    nb01 = nbformat.read(copy / "01_policy_softmax.ipynb", as_version=4)
    next(c for c in nb01.cells if grade_id(c) == "ex11_1b__manual").source = "By the chain rule, ..."
    nbformat.write(nb01, copy / "01_policy_softmax.ipynb")
    check = next(c for c in read(copy / "04_two_mdp_views.ipynb").cells if grade_id(c) == "ex11_3b__tests")
    failing = next(c for c in read(copy / "02_temperature.ipynb").cells if grade_id(c) == "task2__tests")
    progress_file = tmp_path / "progress.json"
    progress_file.write_text(json.dumps({"version": 2, "done": {"ex11_3b": "2026-01-01T00:00:00+00:00"}, "checks": {
        "ex11_3b": {progress.fingerprint(check.source): {"state": "passed", "at": "2026-01-01T00:00:00+00:00"}},
        "task2": {progress.fingerprint(failing.source): {"state": "failing", "at": "2026-01-01T00:00:00+00:00", "reason": "Check failed: returned NaN"}}}}))

    html = html_of(execute(read(START_HERE), grader=False, progress_file=progress_file))
    names = sorted(path.stem for path in RELEASE_DIR.glob("*.ipynb"))
    every = [c for name in names for c in graded_cells(name)]
    overview_rows = 1 + len(names) + 1  # the overview on top: header, a row per notebook, the total
    assert html.count("<tr>") + html.count("<tr ") == overview_rows + 1 + len(every) + len(names) + 1  # header, items, totals
    ex11_3b, ex11_1b = progress.exercise("ex11_3b"), progress.exercise("ex11_1b")
    assert "<td>visible check</td><td>3</td><td>passed</td>" in row_of(html, "Exercise 11.3(b)")
    assert f"<td>{html_text.escape(ex11_3b.title)}</td>" in row_of(html, "Exercise 11.3(b)")
    # a written answer is in, for the instructor to grade: not done, and its points not counted
    assert (f"<td>{html_text.escape(ex11_1b.title)}</td><td>written answer</td><td>2</td>"
            f"<td>{progress.WRITTEN_STATUS}</td>") in row_of(html, "Exercise 11.1(b)")
    assert "<td>visible check</td><td>3</td><td>Check failed: returned NaN</td>" in row_of(html, "Lab Task 2")
    assert html.count("<td>passed</td>") == 1 and html.count(f"<td>{progress.WRITTEN_STATUS}</td>") == 1
    nb01_cells = graded_cells("01_policy_softmax")
    assert (f"<td>notebook 01_policy_softmax</td><td></td><td>0 of {len(nb01_cells)} items done, 1 written (graded by hand)</td>"
            f"<td>0 of {points_of(nb01_cells)}</td>") in html
    assert (f"<td>course total</td><td></td><td>1 of {len(every)} items done, 1 written (graded by hand)</td>"
            f"<td>3 of {points_of(every)}</td>" in html)


# a numerically stable softmax, and the formula as written (NaN for logits near 1000): the student's words
STABLE = ("def softmax(logits, dim=-1):\n"
          "    shifted = logits - logits.max(dim=dim, keepdim=True).values\n"
          "    weights = torch.exp(shifted)\n"
          "    return weights / weights.sum(dim=dim, keepdim=True)\n")
UNSHIFTED = ("def softmax(logits, dim=-1):\n"
             "    weights = torch.exp(logits)\n"
             "    return weights / weights.sum(dim=dim, keepdim=True)\n")
CHANGED = progress.SAVED_OTHER_STATUS  # "changed since its check passed: run the check (or ... save the notebook)"


def save_answer(path, grade, source):
    nb = nbformat.read(path, as_version=4)
    next(c for c in nb.cells if grade_id(c) == grade).source = source
    nbformat.write(nb, path)


@pytest.mark.slow
def test_a_pass_belongs_to_the_answer_that_passed_on_the_start_page_and_in_the_summary(tmp_path, monkeypatch):
    """The softmax check passes in the notebook's own kernel; the answer is then replaced by one without the
    max shift and saved, never run: the start page and the notebook's summary say it changed, not passed."""
    copy = tmp_path / "work" / "ch11"
    shutil.copytree(RELEASE_DIR, copy)
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(copy))
    notebook, progress_file = copy / "01_policy_softmax.ipynb", tmp_path / "progress.json"
    save_answer(notebook, "nb01_softmax__answer", STABLE)
    nb = read(notebook)
    check = next(i for i, c in enumerate(nb.cells) if grade_id(c) == "nb01_softmax__tests")
    runner = client(nb, timeout=120)
    env = dict(kernel_env(grader=False, progress_file=progress_file), JPY_SESSION_NAME=str(notebook),
               LMPOLICY_WORK_DIR=str(copy))
    with runner.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells[:check + 1]):  # top to bottom, as a student does, to the check
            if cell.cell_type == "code":
                assert run_cell(runner, cell, index) is None, f"cell {index} failed"
        assert "passed the visible checks" in "".join(o.get("text", "") for o in nb.cells[check].outputs)
        # the first check of the session imported lmpolicy.notebook.checks after the answer ran: the pass still names it
        (run,) = json.loads(progress_file.read_text())["checks"]["nb01_softmax"].values()
        answer_cell = next(c.id for c in nb.cells if grade_id(c) == "nb01_softmax__answer")
        assert run["answer"] == {answer_cell: progress.fingerprint(STABLE)}

        def summary() -> list[str]:
            cell = nbformat.v4.new_code_cell("from lmpolicy.notebook import checks\nchecks.summary('01_policy_softmax')")
            nb.cells.append(cell)  # a cell the student adds at the end
            assert run_cell(runner, cell, len(nb.cells) - 1) is None
            return "".join(o.get("text", "") for o in cell.outputs).splitlines()

        passed = html_of(execute(read(START_HERE), grader=False, progress_file=progress_file))
        assert "<td>passed</td>" in row_of(passed, "Exercise 01.softmax")
        assert any(line.startswith("\u2713 Exercise 01.softmax visible check") and line.endswith("passed")
                   for line in summary())

        save_answer(notebook, "nb01_softmax__answer", UNSHIFTED)  # changed and saved, not run
        changed = html_of(execute(read(START_HERE), grader=False, progress_file=progress_file))
        assert f"<td>{html_text.escape(CHANGED)}</td>" in row_of(changed, "Exercise 01.softmax"), row_of(changed, "Exercise 01.softmax")
        assert "<td>notebook 01_policy_softmax</td><td></td><td>0 of " in changed
        lines = summary()
        assert lines[0].startswith("01_policy_softmax: 0 of "), lines
        assert any(line.startswith("\u2717 Exercise 01.softmax visible check") and line.endswith(CHANGED)
                   for line in lines), lines

        # the changed answer run, then its check: the check's own verdict replaces "changed"
        nb = read(notebook)
        for index, cell in enumerate(nb.cells):
            if grade_id(cell) in ("nb01_softmax__answer", "nb01_softmax__tests"):
                run_cell(runner, cell, index)
        failing = html_of(execute(read(START_HERE), grader=False, progress_file=progress_file))
        assert "<td>Check failed: " in row_of(failing, "Exercise 01.softmax")
