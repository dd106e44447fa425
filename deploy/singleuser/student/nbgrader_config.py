"""nbgrader of a student's server on the hub: the course's id and the shared exchange, nothing else.

Students never load the course's own nbgrader_config.py (it names the instructor's folder and gradebook).
Assignments are fetched into the home (the server's root), feedback into <assignment>/feedback/.
"""
import os

c = get_config()  # noqa: F821

c.CourseDirectory.course_id = "lm-policy"
c.Exchange.root = os.environ.get("LMPOLICY_EXCHANGE", "/srv/nbgrader/exchange")
