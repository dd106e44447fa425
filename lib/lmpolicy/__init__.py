"""lmpolicy: the student's library of the course "The language model as a policy".

``tinylm`` holds TinyLM and its training, ``exact`` the exact solvers of toy language models, and
``demos`` the two interactive demos, ``notebook`` the notebook runtime (checks, progress, the code rule) and
``per_student`` every student's own numbers; docs/architecture.md lists every module.
The instructor's grader is a separate package, ``lmpolicy_grader``; nothing here imports it or nbgrader.
"""

from lmpolicy import arithmetic

arithmetic.pin()  # before torch computes anything: the same numbers on every x86-64 machine

from lmpolicy.notebook import in_view  # noqa: E402

in_view.install()  # in a JupyterLab kernel: the cell where Run All stopped is brought into view

__version__ = "0.1.0"
