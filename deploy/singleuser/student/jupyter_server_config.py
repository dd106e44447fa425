# The course's lab extension: while Validate runs, which cell of the notebook runs (lmpolicy.notebook.validation_progress)
from lmpolicy.notebook.validation_progress import add_lab_extension

add_lab_extension(c)  # noqa: F821 (c: the config Jupyter passes to this file)
