"""nbgrader of an instructor's server on the hub: the course's own configuration, from the course folder.

The course folder (LMPOLICY_COURSE_FOLDER, relative to the home) holds a copy of the repository's
nbgrader_config.py, source/ and release/; its configuration then roots the course there, reads the
shared exchange from LMPOLICY_EXCHANGE and the gradebook from LMPOLICY_GRADEBOOK_URL (else SQLite in
the folder), so formgrader and `python -m lmpolicy_grader grade` in a terminal grade the same way.
"""
import os
from pathlib import Path

c = get_config()  # noqa: F821

course_config = Path.home() / os.environ.get("LMPOLICY_COURSE_FOLDER", "lm-policy") / "nbgrader_config.py"
if not course_config.exists():
    raise FileNotFoundError(f"the course folder has no {course_config.name}: expected {course_config}")
load_subconfig(str(course_config))  # noqa: F821
