"""The release: ``nbgrader generate_assignment <assignment> --force`` through nbgrader's API, the gradebook checked first."""
from __future__ import annotations

from pathlib import Path

from lmpolicy_grader.class_grading.course import ASSIGNMENT, load_config


def release(course_root: Path, assignment: str = ASSIGNMENT) -> None:
    """nbgrader generate_assignment <assignment> --force, through nbgrader's API."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    from lmpolicy_grader.class_grading.gradebook import check_gradebook, gradebook_url

    config = load_config(course_root)
    check_gradebook(gradebook_url(config, course_root))  # a wrong URL says so here, not in nbgrader's traceback
    coursedir = CourseDirectory(config=config, root=str(course_root))
    coursedir.assignment_id = assignment
    generate = GenerateAssignment(coursedir=coursedir, config=config)
    generate.force = True
    generate.start()
