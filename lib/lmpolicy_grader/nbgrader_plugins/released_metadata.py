"""Sanitizing: every cell's grader metadata is what the course released for its grade id, or it has none.

Stock nbgrader 0.9.6 puts back a cell's type, lock, points and (for a locked cell) source from the gradebook, but
reads whether a cell is graded or an answer from the submission: a test cell marked as an answer, an answer cell
given points or a graded cell of the student's own then fails the whole notebook ("Inconsistent checksums", "No such
grade cell", "Notebook failed to validate"), which its student cannot act on. Here each flag comes from the gradebook
instead, before ``OverwriteCells`` runs, so such a notebook is graded as released, and a cell whose grade id the
course never released is a plain cell of the student's.
"""
from __future__ import annotations

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from lmpolicy_grader.incidents import Incident, note


def _released(source_notebook) -> dict[str, dict]:
    """grade id -> the nbgrader metadata the course released for that cell (the checksum aside)."""
    points = {cell.name: float(cell.max_score) for cell in source_notebook.grade_cells}
    answers = {cell.name for cell in source_notebook.solution_cells}
    tasks = {cell.name for cell in source_notebook.task_cells}
    released = {}
    for cell in source_notebook.source_cells:
        metadata = {"grade": cell.name in points, "grade_id": cell.name, "locked": bool(cell.locked),
                    "schema_version": 3, "solution": cell.name in answers, "task": cell.name in tasks}
        if cell.name in points:
            metadata["points"] = points[cell.name]
        released[cell.name] = metadata
    return released


def _changed(submitted: dict, released: dict) -> list[str]:
    """The keys of the released metadata that the submission's copy gives another value."""
    def same(key):
        if key == "points":
            try:
                return float(submitted.get(key)) == released[key]
            except (TypeError, ValueError):
                return False
        return submitted.get(key) == released[key]
    return sorted(key for key in released if not same(key))


class ReleasedMetadata(NbGraderPreprocessor):
    """Each cell's nbgrader metadata set to the released one for its grade id (its checksum kept for
    ``OverwriteCells`` to judge); the metadata of a cell with any other grade id, or none, removed."""

    def preprocess(self, nb, resources):
        notebook, assignment = resources["nbgrader"]["notebook"], resources["nbgrader"]["assignment"]
        with Gradebook(resources["nbgrader"]["db_url"]) as gradebook:
            released = _released(gradebook.find_notebook(notebook, assignment))
        for cell in nb.cells:
            if "nbgrader" not in cell.metadata:
                continue
            submitted = cell.metadata["nbgrader"]
            grade_id = submitted.get("grade_id") if isinstance(submitted, dict) else None
            if not isinstance(grade_id, str) or grade_id not in released:
                del cell.metadata["nbgrader"]
                self.log.warning("Removed the grader metadata of a cell the course did not release (%r)", grade_id)
                note(Incident.RESTORED, notebook, "grader metadata the course did not release taken off a cell")
                continue
            changed = _changed(submitted, released[grade_id])
            if changed:
                self.log.warning("Put back the released %s of %s", ", ".join(changed), grade_id)
                note(Incident.RESTORED, notebook, f"released {', '.join(changed)} of {grade_id} put back", grade_id)
            cell.metadata["nbgrader"] = {**released[grade_id],
                                         **({"checksum": submitted["checksum"]} if "checksum" in submitted else {})}
        return nb, resources
