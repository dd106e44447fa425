"""A written answer's rubric, read from the mark scheme its source cell already holds.

Each manually graded markdown cell of a source notebook holds, between nbgrader's solution markers, its mark
scheme: a heading ``**Mark scheme (N points).**``, one line per credited point, then perhaps remarks and a
``**Model answer.**``. That text is the rubric's one place; this module reads it:

- an **item** is a line that starts with its points, ``1 point: ...``, ``1 point, beta to 0: ...`` or
  ``1 point for saying ...`` (a ``*`` or ``-`` bullet in front allowed), or, under a heading that says
  ``N point(s) per <thing>``, each numbered line ``1. ...``, worth N each. A bulleted or numbered item goes on
  over the indented lines under it; a plain one over the lines up to the next blank line or item;
- a **note** is any other paragraph of the scheme ("Half a point for ...": when an item earns half),
  shown beside the items for the grader to weigh;
- a scheme with no item line is one item worth the heading's points (a one-sentence scheme);
- the **model answer** is what follows ``**Model answer.**``.

The items' points must add up to the heading's, and the heading's to the cell's nbgrader points; otherwise
``MarkSchemeError`` says which cell and what is off.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

SOLUTION = re.compile(r"### BEGIN SOLUTION[ \t]*\n?(.*?)### END SOLUTION", re.DOTALL)
HEADING = re.compile(r"\*\*Mark scheme \((?P<points>\d+(?:\.\d+)?) points?\)(?P<rest>[^*]*)\*\*")
PER_UNIT = re.compile(r"(?P<points>\d+(?:\.\d+)?) points? per \w+")
MODEL_ANSWER = re.compile(r"\*\*Model answer\.?\*\*")
ITEM = re.compile(r"^(?P<indent>[ \t]*)(?P<bullet>[*-][ \t]+)?(?P<points>\d+(?:\.\d+)?) points?"
                  r"(?:[ \t]*[:,][ \t]*|[ \t]+(?=for\b))(?P<text>.*)$")
NUMBERED = re.compile(r"^(?P<indent>[ \t]*)\d+\.[ \t]+(?P<text>.*)$")


class MarkSchemeError(ValueError):
    """A manually graded cell whose mark scheme gives no rubric: the message names the notebook and cell."""


@dataclass(frozen=True)
class Item:
    points: float
    text: str  # markdown, as the mark scheme words it


@dataclass(frozen=True)
class Rubric:
    notebook: str
    cell: str  # the cell's grade id
    points: float
    items: tuple[Item, ...]
    notes: tuple[str, ...] = field(default=())
    model_answer: str = ""


def _number(text: str) -> float:
    return float(text)


def _blocks(scheme: str, per_unit: float | None) -> tuple[list[Item], list[str]]:
    """The scheme's items and its other paragraphs (notes), in order."""
    items: list[dict] = []
    notes: list[dict] = []
    current = None  # the item or note the next line may continue
    for line in scheme.splitlines():
        item = ITEM.match(line)
        numbered = NUMBERED.match(line) if per_unit is not None and not item else None
        indent = len(line) - len(line.lstrip())
        if item or numbered:
            match = item or numbered
            listed = bool(numbered or item.group("bullet"))
            # a listed item goes on over deeper-indented lines, a plain one up to a blank line
            current = {"points": _number(item.group("points")) if item else per_unit,
                       "lines": [match.group("text").strip()],
                       "indent": len(match.group("indent")) if listed else None}
            items.append(current)
        elif not line.strip():
            current = None
        elif current is not None and "points" in current and (current["indent"] is None or indent > current["indent"]):
            current["lines"].append(line.strip())
        elif current is not None and "points" not in current:
            current["lines"].append(line.strip())
        else:
            current = {"lines": [line.strip()]}
            notes.append(current)
    return ([Item(item["points"], " ".join(item["lines"])) for item in items],
            [" ".join(note["lines"]) for note in notes])


def parse(source: str, notebook: str, cell: str, points: float) -> Rubric:
    """The rubric of a manually graded cell from its source text (mark scheme between the solution markers)."""
    where = f"{notebook}, cell {cell}"
    solution = SOLUTION.search(source)
    if solution is None:
        raise MarkSchemeError(f"{where}: no mark scheme between '### BEGIN SOLUTION' and '### END SOLUTION'")
    heading = HEADING.search(solution.group(1))
    if heading is None:
        raise MarkSchemeError(f"{where}: no '**Mark scheme (N points).**' heading in its solution")
    total = _number(heading.group("points"))
    if total != points:
        raise MarkSchemeError(f"{where}: the mark scheme says {total:g} points, the cell is worth {points:g}")
    body = solution.group(1)[heading.end():]
    model = MODEL_ANSWER.search(body)
    scheme, model_answer = (body[:model.start()], body[model.end():].strip()) if model else (body, "")
    per_unit = PER_UNIT.search(heading.group("rest"))
    lead = heading.group("rest").strip(" .,")
    first_line, _, rest = scheme.partition("\n")
    if lead and not ITEM.match(first_line.strip()):  # "..., 1 point per reason** for a mechanism ...": a note
        scheme = f"{lead} {first_line.strip()}\n\n{rest}"
    else:
        scheme = f"{first_line.strip()}\n{rest}"
    items, notes = _blocks(scheme, _number(per_unit.group("points")) if per_unit else None)
    if not items:
        if not notes:
            raise MarkSchemeError(f"{where}: the mark scheme has a heading and nothing under it")
        items, notes = [Item(total, " ".join(notes))], []
    if (found := sum(item.points for item in items)) != total:
        raise MarkSchemeError(f"{where}: its items add up to {found:g} points, its mark scheme says {total:g} "
                              f"(items: {', '.join(f'{item.points:g}' for item in items)})")
    return Rubric(notebook, cell, total, tuple(items), tuple(notes), model_answer)


def is_written_answer(cell) -> bool:
    """A manually graded markdown cell: what a grader grades by hand, and what has a rubric."""
    nbgrader = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "markdown" and bool(nbgrader.get("grade")) and bool(nbgrader.get("solution"))


def rubrics(source_notebook: Path) -> dict[str, Rubric | MarkSchemeError]:
    """Every written answer's rubric in a source notebook, by grade id, in the notebook's order; a cell whose mark
    scheme gives none maps to its MarkSchemeError (the grader still grades it, by typing a score)."""
    source_notebook = Path(source_notebook)
    notebook = nbformat.read(source_notebook, as_version=4)
    found: dict[str, Rubric | MarkSchemeError] = {}
    for cell in notebook.cells:
        if is_written_answer(cell):
            nbgrader = cell.metadata["nbgrader"]
            try:
                found[nbgrader["grade_id"]] = parse(cell.source, source_notebook.stem, nbgrader["grade_id"],
                                                    float(nbgrader.get("points", 0)))
            except MarkSchemeError as error:
                found[nbgrader["grade_id"]] = error
    return found
