"""The student's nbgrader, wherever it runs from (`make lab` puts this folder on JUPYTER_CONFIG_PATH, so
`nbgrader validate` in any folder of the course's terminals and the Validate button both load it): Validate
reports each failing check as its short ✗ lines under its exercise's name (lib/lmpolicy/notebook/validator.py).
The course root's nbgrader_config.py does the same for whoever starts nbgrader there."""
from lmpolicy.notebook.validator import use_in_nbgrader

use_in_nbgrader()
