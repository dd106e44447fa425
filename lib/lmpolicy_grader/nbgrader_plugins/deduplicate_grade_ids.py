"""Sanitizing: a duplicated cell does not fail the whole notebook."""
from __future__ import annotations

from nbgrader.preprocessors import DeduplicateIds

from lmpolicy_grader.incidents import Incident, note


class DeduplicateGradeIds(DeduplicateIds):
    """Stock DeduplicateIds (the last copy of a duplicated cell keeps its grade id), except that the
    earlier copies lose their nbgrader metadata entirely: stock leaves an empty ``nbgrader: {}``,
    which nbgrader 0.9.6 then rejects as "an old version of the metadata", failing the notebook."""

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.metadata.get("nbgrader") == {}:
            del cell.metadata["nbgrader"]
            note(Incident.DUPLICATE, resources["nbgrader"]["notebook"],
                 "a duplicated cell lost its grade id (the last copy keeps it)")
        return cell, resources
