"""A class that starts at once, small: six students ask for their server at the same moment on a hub that loads two
at a time (LMPOLICY_HUB_START_SLOTS=2), so four wait in line; then each submits (two of them twice), the instructor
collects, grades with the course's grader and releases feedback, and everyone fetches theirs.

It fails if the hub kills a server or refuses a start, if a waiting student is not told they are waiting, if a
submission is lost or the wrong copy collected, if formgrader, the feedback page or `nbgrader export` gets a score
wrong, or if a submit warns of notebooks it never submitted (JupyterLab's checkpoints). bench/bench_hub.py runs the
same flow with twenty students and prints the figures; this test asserts none.
"""
from __future__ import annotations

import pytest

from .course_flow import ClassRun, formgrader_action
from .hub import ASSIGNMENT, RUN_TAG, check_tools, make_site, postgres_server, remove_site, start_hub, stop_hub  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hub")]

CLASS = tuple(f"{RUN_TAG}-class{number}" for number in range(1, 7))
TEACHER = f"{RUN_TAG}-classteacher"  # not test_hub.py's instructor: each module's site has accounts of its own
SLOTS = 2


@pytest.fixture(scope="module")
def class_hub(postgres_server):
    check_tools()
    site = make_site(students=CLASS, instructor=TEACHER)
    hub = None
    try:
        # the instructor's server first, then the instructor releases ch11 before the class arrives
        hub = start_hub(site, gradebook_url=postgres_server.new_database("class_gradebook"),
                        settings={"LMPOLICY_HUB_START_SLOTS": str(SLOTS)}, servers=(site.instructor,))
        formgrader_action(hub, f"assignment/{ASSIGNMENT}/assign")
        formgrader_action(hub, f"assignment/{ASSIGNMENT}/release")
        yield hub
    finally:
        if hub is not None:
            stop_hub(hub)
        remove_site(site)


def test_a_class_starting_at_once_waits_in_line_and_every_submission_is_graded_right(class_hub):
    run = ClassRun(class_hub, class_hub.site)
    run.start()
    run.submit()
    run.grade_and_feed_back()
    assert run.problems() == [], "\n".join(run.problems())
    assert len(run.ready_times()) == len(CLASS)
    # everyone beyond the two who got a slot at once was told they were waiting, with their place in line
    queued = run.queued()
    assert len(queued) >= len(CLASS) - SLOTS, {r.name: r.progress for r in run.students.values()}
    assert any("you are 1st in line" in message for r in run.students.values() for message in r.progress)
    assert sum(len(r.plan) == 2 for r in run.students.values()) == 2  # two students submitted twice
