"""Written answers graded with a rubric: each answer's mark scheme read as items (``mark_scheme``), the class's
answers to a cell grouped when they are the same text (``answer_groups``), and the page in formgrader where a grader
applies items with a click or a key (served by ``lmpolicy_grader.formgrader_guard``), which writes nbgrader's own
manual grade and comment through formgrader's API."""
