"""Sanitizing: every cell of the release a student deleted, except answer cells, comes back in place.

Stock nbgrader 0.9.6 restores deleted grade cells only (``OverwriteCells.add_missing_cells``), not a
deleted locked import cell, nor an unlocked set-up cell, so a correct answer that relies on them fails.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from traitlets import Unicode

from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from lmpolicy_grader.incidents import Incident, note


def _release_cells(root: str, assignment: str, notebook: str) -> list:
    for folder in ("release", "source"):
        path = Path(root) / folder / assignment / f"{notebook}.ipynb"
        if path.exists():
            return nbformat.read(path, as_version=4).cells
    return []


def _key(cell):
    """A cell's identity across release and submission: its grade id, else its nbformat cell id."""
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    return grade_id if grade_id else ("id", cell.get("id"))


class RestoreDeletedCells(NbGraderPreprocessor):
    """Re-add every cell of the release a student deleted, except answer cells, where the release had it.

    Locked and grade cells come from the gradebook (test cells with their hidden tests). Plain code
    cells of the release (set-up, worked examples) are found by their nbformat cell id, when the
    submission carries the release's ids; a deleted import cell then never fails a correct answer.
    """

    course_root = Unicode("", help="course folder holding release/<assignment>/ (cell order)").tag(config=True)
    notice = Unicode("This cell was missing from your submission; the grader put it back.").tag(config=True)

    def preprocess(self, nb, resources):
        notebook, assignment = resources["nbgrader"]["notebook"], resources["nbgrader"]["assignment"]
        release = _release_cells(self.course_root, assignment, notebook)
        with Gradebook(resources["nbgrader"]["db_url"]) as gradebook:
            source_notebook = gradebook.find_notebook(notebook, assignment)
            max_scores = {cell.name: cell.max_score for cell in source_notebook.grade_cells}
            solutions = {cell.name for cell in source_notebook.solution_cells}
            wanted = {cell.name: self._graded_cell(cell, max_scores.get(cell.name), cell.name in solutions)
                      for cell in source_notebook.source_cells if cell.locked or cell.name in max_scores}
        present = [_key(c) for c in nb.cells]
        if {c.get("id") for c in nb.cells} & {c.get("id") for c in release} - {None}:  # ids of the release
            wanted.update({_key(c): self._plain_cell(c) for c in release
                           if c.cell_type == "code" and isinstance(_key(c), tuple) and c.get("id")})
        order = [_key(c) for c in release] or list(wanted)
        for position, key in enumerate(order):
            if key not in wanted or key in present:
                continue
            previous = [k for k in order[:position] if k in present]
            at = present.index(previous[-1]) + 1 if previous else 0
            nb.cells.insert(at, wanted[key])
            present.insert(at, key)
            name = key if isinstance(key, str) else f"cell {key[1]}"
            self.log.warning("Restored deleted %s", name)
            note(Incident.RESTORED, notebook, f"deleted {name} put back", key if isinstance(key, str) else None)
        return nb, resources

    def _plain_cell(self, release_cell):
        cell = nbformat.v4.new_code_cell(f"{release_cell.source}\n# {self.notice}")
        cell["id"] = release_cell["id"]
        return cell

    def _graded_cell(self, source_cell, max_score, is_solution):
        metadata = {"grade": max_score is not None, "grade_id": source_cell.name, "locked": source_cell.locked,
                    "solution": is_solution, "schema_version": 3, "task": False}
        if max_score is not None:
            metadata["points"] = max_score
        if source_cell.cell_type == "code":
            # the notice goes last: a cell magic must stay on the first line
            cell = nbformat.v4.new_code_cell(f"{source_cell.source}\n# {self.notice}")
        else:
            cell = nbformat.v4.new_markdown_cell(f"*{self.notice}*\n\n{source_cell.source}")
            if is_solution:  # a deleted answer comes back as the blank stub: it scores "no response"
                cell.source = source_cell.source
        cell.metadata["nbgrader"] = metadata
        if not is_solution:
            cell.metadata.update(editable=False, deletable=False)
        metadata["checksum"] = utils.compute_checksum(cell) if is_solution else source_cell.checksum
        return cell
