"""The class's answers to a notebook's written cells, grouped so that one grading serves every identical answer.

Two answers are the same when their texts are equal after collapsing whitespace and ignoring case
(``normalised``). A group also shares its grade: members whose gradebook score, comment or re-check flag differ
are separate groups, so an answer taken out of its group and graded otherwise stays apart when the page is opened
again, and answers graded earlier in formgrader keep what they got. Answers are read from ``autograded/``, the
notebooks formgrader shows; grades and comments from nbgrader's gradebook, whose ids formgrader's API takes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat


def normalised(text: str) -> str:
    """What makes two answers the same answer: the words, whatever the whitespace and the case."""
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Member:
    """One student's answer to one written cell, with the gradebook ids formgrader's API writes through."""
    student: str
    submission_id: str  # the submitted notebook's id (formgrader's grading page)
    grade_id: str  # nbgrader's Grade.id: PUT /formgrader/api/grade/<grade_id>
    comment_id: str  # nbgrader's Comment.id: PUT /formgrader/api/comment/<comment_id>
    manual_score: float | None
    extra_credit: float | None
    comment: str  # the manual comment, "" when none
    needs_manual_grade: bool


@dataclass
class Group:
    cell: str  # the written cell's grade id
    answer: str  # the answer's text, as its first member wrote it
    members: list[Member] = field(default_factory=list)


def _answers(notebook_file: Path) -> dict[str, str]:
    notebook = nbformat.read(notebook_file, as_version=4)
    return {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in notebook.cells
            if "grade_id" in cell.metadata.get("nbgrader", {})}


def answer_groups(gradebook, notebook: str, assignment: str, cells: list[str],
                  autograded_file: Callable[[str], Path]) -> list[Group]:
    """The groups of every autograded submission's answers to ``cells`` (grade ids, in the notebook's order), cell
    by cell, the largest group first. ``autograded_file(student)`` is the student's autograded notebook; a
    submission without one (never autograded) is left out, as formgrader leaves it out."""
    by_key: dict[tuple, Group] = {}
    for submission in sorted(gradebook.notebook_submissions(notebook, assignment), key=lambda s: s.student.id):
        path = autograded_file(submission.student.id)
        if not path.exists():
            continue
        answers = _answers(path)
        grades = {grade.name: grade for grade in submission.grades}
        comments = {comment.name: comment for comment in submission.comments}
        for cell in cells:
            if cell not in grades or cell not in comments:
                continue
            grade, comment = grades[cell], comments[cell]
            answer = answers.get(cell, "")
            member = Member(submission.student.id, submission.id, grade.id, comment.id, grade.manual_score,
                            grade.extra_credit, comment.manual_comment or "", bool(grade.needs_manual_grade))
            key = (cell, normalised(answer), member.manual_score, member.comment.strip(), member.needs_manual_grade)
            by_key.setdefault(key, Group(cell, answer)).members.append(member)
    order = {cell: index for index, cell in enumerate(cells)}
    return sorted(by_key.values(), key=lambda group: (order[group.cell], -len(group.members),
                                                      group.members[0].student))
