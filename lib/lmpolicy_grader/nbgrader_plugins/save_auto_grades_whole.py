"""Autograding: a notebook's grades reach the gradebook whole or not at all."""
from __future__ import annotations

from contextlib import contextmanager

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades


class SaveAutoGradesWhole(SaveAutoGrades):
    """Stock SaveAutoGrades in one transaction per notebook.

    Stock commits after every grade and comment, so a gradebook server lost in the middle of a notebook
    (a restart, an outage) leaves some of its cells graded and the rest as they were: a half-graded notebook
    that reads like a finished one. Here the cells are only flushed as they are graded and the notebook is
    committed once, so the server keeps either all of it or none of it (and the grader reports it FAILED)."""

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.student_id = resources["nbgrader"]["student"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            with _commit_only_flushes(self.gradebook.db) as commit:
                nb, resources = NbGraderPreprocessor.preprocess(self, nb, resources)
            commit()
        return nb, resources


@contextmanager
def _commit_only_flushes(session):
    """Inside, ``session.commit()`` (which SaveAutoGrades calls per cell) only flushes; yields the real commit.
    What is flushed and never committed is rolled back when the Gradebook closes its session."""
    commit = session.commit
    session.commit = session.flush
    try:
        yield commit
    finally:
        del session.commit
