"""nbgrader of a student's server on the hub: the course's id, the shared exchange, and a submit that does not
warn of notebooks it never submits.

Students never load the course's own nbgrader_config.py (it names the instructor's folder and gradebook).
Assignments are fetched into the home (the server's root), feedback into <assignment>/feedback/.
"""
import fnmatch
import os
from pathlib import PurePath

import nbgrader.exchange.default.submit as stock_submit

c = get_config()  # noqa: F821

# Validate reports each failing check as its short verdict under the exercise's name (lib/lmpolicy/notebook/validator.py)
try:
    from lmpolicy.notebook.validator import use_in_nbgrader
    use_in_nbgrader()
except ImportError:  # an image without the course's library: nbgrader's own report
    pass

c.CourseDirectory.course_id = "lm-policy"
c.Exchange.root = os.environ.get("LMPOLICY_EXCHANGE", "/srv/nbgrader/exchange")


class SubmitWithoutIgnoredNotebooks(stock_submit.ExchangeSubmit):
    """nbgrader's submit, whose check of the submitted notebooks against the release skips what it does not copy.

    nbgrader 0.9 copies the assignment folder without what `CourseDirectory.ignore` names (JupyterLab's
    `.ipynb_checkpoints`, among others), but lists the submitted notebooks from every file below it; so each
    submit of a notebook JupyterLab has saved warns "Possible missing notebooks and/or extra notebooks ...
    .ipynb_checkpoints/...-checkpoint.ipynb: EXTRA", of a copy that was never submitted. Here the list leaves
    out the notebooks whose path has a part `CourseDirectory.ignore` matches, the rule the copy follows; a
    notebook the student really added, or one missing, is still named.
    """

    def check_filename_diff(self):
        lists_all = stock_submit.find_all_notebooks
        ignore = list(self.coursedir.ignore)

        def submitted_notebooks(path):
            return [notebook for notebook in lists_all(path)
                    if not any(fnmatch.fnmatch(part, glob) for part in PurePath(notebook).parts for glob in ignore)]

        stock_submit.find_all_notebooks = submitted_notebooks  # the stock check, with the list the copy makes
        try:
            super().check_filename_diff()
        finally:
            stock_submit.find_all_notebooks = lists_all


c.ExchangeFactory.submit = SubmitWithoutIgnoredNotebooks
