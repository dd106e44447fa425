"""Release: the check cells open collapsed, so that a student meets the verdict, not 40-65 lines of test code."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from lmpolicy_grader.cells import is_test


class CollapseCheckCells(NbGraderPreprocessor):
    """Give each check cell JupyterLab's collapsed input (cell metadata ``jupyter.source_hidden``).

    A collapsed cell still runs and shows its output (the ✓ or ✗ verdict) in full; its code is one
    click away (the blue bar left of the cell, or the "⋯" that stands for the code; View ▸ Expand All
    Code opens every one). The metadata is outside nbgrader's checksums, so opening a cell changes
    nothing for grading."""

    def preprocess_cell(self, cell, resources, cell_index):
        if is_test(cell):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
        return cell, resources
