"""Every nbgrader plug-in of the course, one module each; nbgrader_config.py names them and declares the pipelines.

The preprocessors close the holes of stock nbgrader 0.9.6 (see docs/instructors.md); besides them, the
feedback's HTML exporter (``feedback_exporter``) and the ``nbgrader export`` plugin (``export``). The
preprocessors ``nbgrader_config.py`` names most are re-exported here:

- ``DeduplicateGradeIds`` (sanitizing): a duplicated cell does not fail the whole notebook.
- ``RestoreDeletedCells`` (sanitizing): deleted cells, except answers, come back where the release had them.
- ``GradingExecute`` (autograding): stock ``Execute`` in the limited kernel, with timeouts, a time
  budget, an output cap and a clear reason when it fails; the test cells in a trusted kernel
  (``trusted_tests.runner``).
- ``SaveAutoGradesWhole`` (autograding): stock ``SaveAutoGrades`` in one transaction per notebook.
- ``HideHiddenTests`` (feedback): no hidden test, nor its lines, in the feedback.

What went wrong while grading is appended to ``INCIDENTS`` (``lmpolicy_grader.incidents``) for the grader's report.
"""
from lmpolicy_grader.nbgrader_plugins.deduplicate_grade_ids import DeduplicateGradeIds
from lmpolicy_grader.nbgrader_plugins.grading_execute import GradingExecute
from lmpolicy_grader.nbgrader_plugins.hide_hidden_tests import HideHiddenTests
from lmpolicy_grader.incidents import INCIDENTS, GradingFailed, Incident
from lmpolicy_grader.nbgrader_plugins.restore_deleted_cells import RestoreDeletedCells
from lmpolicy_grader.nbgrader_plugins.save_auto_grades_whole import SaveAutoGradesWhole

__all__ = ["DeduplicateGradeIds", "GradingExecute", "GradingFailed", "HideHiddenTests", "INCIDENTS", "Incident",
           "RestoreDeletedCells", "SaveAutoGradesWhole"]
