"""Every written answer's rubric is read from the mark scheme in its source cell, and adds up to the cell's points."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from lmpolicy_grader.rubric.mark_scheme import Item, MarkSchemeError, is_written_answer, parse, rubrics

REPO = Path(__file__).resolve().parents[3]
SOURCES = sorted((REPO / "source" / "ch11").glob("*.ipynb"))


def _written_cells():
    for path in SOURCES:
        for cell in nbformat.read(path, as_version=4).cells:
            if is_written_answer(cell):
                yield pytest.param(path, cell.metadata["nbgrader"], id=f"{path.stem}:{cell.metadata['nbgrader']['grade_id']}")


WRITTEN = list(_written_cells())


def test_the_chapter_has_written_answers():
    assert len(WRITTEN) >= 19  # the count: 19 answers per student graded by hand


@pytest.mark.parametrize(("path", "nbgrader"), WRITTEN)
def test_each_written_cell_yields_items_that_add_up_to_its_points(path, nbgrader):
    rubric = rubrics(path)[nbgrader["grade_id"]]
    if isinstance(rubric, MarkSchemeError):
        pytest.fail(f"{path.stem}, cell {nbgrader['grade_id']}: no rubric: {rubric}")
    assert rubric.items, f"{path.stem}, cell {nbgrader['grade_id']}: no item"
    assert sum(item.points for item in rubric.items) == nbgrader["points"], (
        f"{path.stem}, cell {nbgrader['grade_id']}: items add up to {sum(i.points for i in rubric.items)}, "
        f"the cell is worth {nbgrader['points']}")
    assert all(item.text.strip() for item in rubric.items), f"{path.stem}, cell {nbgrader['grade_id']}: an empty item"
    assert not any("Model answer" in item.text for item in rubric.items)


def _cell(scheme: str) -> str:
    return f"### BEGIN SOLUTION\n{scheme}\n### END SOLUTION"


def test_items_of_each_written_form():
    plain = parse(_cell("**Mark scheme (2 points).**\n1 point: the chain rule\nfor the tokens.\n"
                        "1 point: logs.\n\n**Model answer.** It factors."), "nb", "c__manual", 2)
    assert plain.items == (Item(1, "the chain rule for the tokens."), Item(1, "logs."))
    assert plain.model_answer == "It factors."
    bullets = parse(_cell("**Mark scheme (2 points).**\n\n* 1 point, $\\beta \\to 0$: hard max,\n  on $b$.\n"
                          "* 1 point: soft.\n\nHalf a point for a right answer without its reason."), "nb", "c", 2)
    assert bullets.items == (Item(1, "$\\beta \\to 0$: hard max, on $b$."), Item(1, "soft."))
    assert bullets.notes == ("Half a point for a right answer without its reason.",)
    inline = parse(_cell("**Mark scheme (1 point).** 1 point for saying that wrong answers get weight 0.\n\n"
                         "**Model answer.** The baseline."), "nb", "c", 1)
    assert inline.items == (Item(1, "for saying that wrong answers get weight 0."),)
    per_reason = parse(_cell("**Mark scheme (2 points), 1 point per reason** for a mechanism:\n1. *One*: a,\n   b.\n"
                             "2. *Two*: c.\nNo point for a reason only named."), "nb", "c", 2)
    assert per_reason.items == (Item(1, "*One*: a, b."), Item(1, "*Two*: c."))
    assert per_reason.notes == ("1 point per reason for a mechanism:", "No point for a reason only named.")
    sentence = parse(_cell("**Mark scheme (1 point).** Unbiased, with $\\ell$ held fixed."), "nb", "c", 1)
    assert sentence.items == (Item(1, "Unbiased, with $\\ell$ held fixed."),)


@pytest.mark.parametrize(("scheme", "points", "says"), [
    ("**Mark scheme (3 points).**\n1 point: a.\n1 point: b.", 3, "its items add up to 2 points, its mark scheme says 3"),
    ("**Mark scheme (2 points).**\n1 point: a.\n1 point: b.", 3, "the mark scheme says 2 points, the cell is worth 3"),
    ("2 points for x*x >= 0.", 2, "no '**Mark scheme (N points).**' heading"),
    ("**Mark scheme (2 points).**", 2, "a heading and nothing under it"),
])
def test_a_scheme_that_gives_no_rubric_names_its_cell(scheme, points, says):
    with pytest.raises(MarkSchemeError) as error:
        parse(_cell(scheme), "05_tilted_optimum", "ex11_5a__manual", points)
    assert str(error.value).startswith("05_tilted_optimum, cell ex11_5a__manual: ") and says in str(error.value)


def test_a_cell_without_solution_markers_names_its_cell():
    with pytest.raises(MarkSchemeError, match="^05_tilted_optimum, cell ex11_5a__manual: no mark scheme between"):
        parse("Just an answer.", "05_tilted_optimum", "ex11_5a__manual", 2)
