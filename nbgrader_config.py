"""nbgrader configuration of the course (the grading issue extends this file)."""
from pathlib import Path

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

COURSE_ROOT = Path(__file__).resolve().parent

c.CourseDirectory.course_id = "lm-policy"
c.CourseDirectory.root = str(COURSE_ROOT)
c.CourseDirectory.db_assignments = [dict(name="ch11")]
# the gradebook is SQLite at the course root (nbgrader's embedded default)
c.CourseDirectory.db_url = f"sqlite:///{COURSE_ROOT / 'gradebook.db'}"
