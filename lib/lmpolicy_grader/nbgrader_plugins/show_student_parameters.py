"""Autograding and feedback: each varying exercise's parameters, as the grader computes them for the student.

A varying exercise (``lmpolicy.per_student.variants``) opens with a locked cell that shows the student's parameters
(grade id ``<exercise>__parameters``). Its output in the submission came from the student's process, which
could print anything there, and the feedback shows no output that process made while graded
(``OutputsAsHandedIn``). This preprocessor writes that output anew, from the student of the submission's
folder: the TA grading in formgrader and the student reading the feedback see the numbers that student was
graded on.
"""
from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from lmpolicy.notebook.catalogue import PARAMETERS_CELL
from lmpolicy.per_student import variants
from lmpolicy_grader.students import Variants



class ShowStudentParameters(NbGraderPreprocessor):
    """Replace the output of each ``<exercise>__parameters`` cell with ``variants.describe`` for the student."""

    def preprocess(self, nb, resources):
        student = (resources.get("nbgrader") or {}).get("student")
        if not Variants(config=self.config).enabled:
            student = None
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            key = grade_id.removesuffix(PARAMETERS_CELL)
            if cell.cell_type == "code" and grade_id.endswith(PARAMETERS_CELL) and key in variants.VARYING:
                text = variants.describe(key, student or None)
                cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": text, "text/plain": text})]
        return nb, resources
