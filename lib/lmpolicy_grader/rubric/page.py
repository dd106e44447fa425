"""The rubric page of one notebook: its written cells' rubrics and the class's answer groups, as HTML.

Every answer is shown as formgrader shows a written answer: its markdown made HTML by nbconvert, then cleaned by the
course's one sanitizer (``sanitize_markup.clean_html``), with its formulas left to MathJax. The page's script
(templates/formgrade/rubric.html.j2) runs with the nonce of the response's Content-Security-Policy; the data it needs
(ids, scores, comments, the items' words) is a JSON data block, never markup. ``lmpolicy_grader.formgrader_guard``
serves it at /formgrader/rubric/<assignment>/<notebook>/.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

from lmpolicy.notebook.catalogue import exercise_key, label
from lmpolicy_grader.content_policy import mathjax_loader
from lmpolicy_grader.nbgrader_plugins.sanitize_markup import clean_html
from lmpolicy_grader.rubric.answer_groups import answer_groups
from lmpolicy_grader.rubric.mark_scheme import MarkSchemeError, rubrics

TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "formgrade"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)


def as_html(markdown: str) -> str:
    """Markdown as a submission's view shows it: nbconvert's HTML (math kept for MathJax), sanitized."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune
    return clean_html(markdown2html_mistune(markdown))


def _cell_label(cell: str) -> str:
    try:
        return label(exercise_key(cell))
    except (KeyError, ValueError):
        return cell


def render(gradebook, coursedir, assignment: str, notebook: str, base_url: str, nonce: str) -> str:
    """The page, for formgrader's gradebook and course folder (``coursedir``, nbgrader's CourseDirectory)."""
    source = Path(coursedir.format_path(coursedir.source_directory, ".", assignment)) / f"{notebook}.ipynb"
    found = rubrics(source) if source.exists() else {}
    cells = []
    for cell, rubric in found.items():
        if isinstance(rubric, MarkSchemeError):
            cells.append({"name": cell, "label": _cell_label(cell), "points": None, "items": [], "notes": [],
                          "model_answer": "", "error": str(rubric)})
        else:
            cells.append({"name": cell, "label": _cell_label(cell), "points": rubric.points,
                          "items": [{"points": item.points, "text": item.text, "html": as_html(item.text)}
                                    for item in rubric.items],
                          "notes": [as_html(note) for note in rubric.notes],
                          "model_answer": as_html(rubric.model_answer) if rubric.model_answer else "",
                          "error": ""})

    def autograded(student: str) -> Path:
        folder = coursedir.format_path(coursedir.autograded_directory, student, assignment)
        return Path(folder) / f"{notebook}.ipynb"

    groups = answer_groups(gradebook, notebook, assignment, list(found), autograded)
    data = {
        "assignment": assignment, "notebook": notebook, "base_url": base_url,
        "cells": [{"name": c["name"], "points": c["points"], "items": [{"points": i["points"], "text": i["text"]}
                                                                      for i in c["items"]]} for c in cells],
        "groups": [{"cell": g.cell, "members": [vars(m) for m in g.members]} for g in groups],
    }
    return _environment().get_template("rubric.html.j2").render(
        assignment=assignment, notebook=notebook, base_url=base_url, nonce=nonce, mathjax_loader=mathjax_loader(),
        cells=cells, labels={c["name"]: c["label"] for c in cells},
        groups=[{"cell": g.cell, "html": as_html(g.answer)} for g in groups], data=data)
