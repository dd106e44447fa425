"""The longest work first, so that neither of `make test`'s two workers is left alone with a long test at the end.

pytest-xdist hands out its work units (an xdist group, or a test outside any group) in the order they are
collected, two to each worker at the start and one more whenever a worker finishes one. A unit of five minutes
collected last keeps one worker busy for five minutes while the other waits. So the units measured longest are
moved to the front, longest first (`make test` passes ``--no-loadscope-reorder`` so that xdist keeps this order);
everything else keeps its collection order after them.

``MEASURED_SECONDS`` holds the units of a minute or more, each with its seconds (setup, call and teardown summed
over a group's tests) in the CI-like run of commit 9e3ffa3 on a 2-core AMD EPYC, read off its timeline: with
``LMPOLICY_TEST_TIMELINE=<file>`` set, each worker appends a line per test (worker, start, end, node id). Refresh the
table from such a run when a unit's time changes much; the same file shows each worker's idle tail.
"""
from __future__ import annotations

import os
import time

import pytest

MEASURED_SECONDS = {
    "notebook08_as_a_student": 405,  # notebook 08 run as a student runs it, then its figures read off the run
    "dask": 373,
    "tests/lmpolicy/tinylm/test_kl_placement.py::test_the_full_run_shows_what_the_notebook_and_readme_say": 373,
    "browser": 600,  # 325 in that run, with about 270 s of browser tests added since
    "hub": 213,
    "ch11_class": 193,
    "postgres": 181,
    "hostile_sandbox": 168,
    "tests/notebooks/test_wrong_answers.py::test_hidden_tests_fail_each_wrong_answer_and_pass_the_reference"
    "[08_tinylm_reinforce]": 140,
    "tiny_class": 139,
    "hostile_in_process": 123,
    "hostile_unseen": 60,  # measured alone since, not in that run
    "variants_class": 97,
    "real_class": 76,
    "tests/notebooks/test_execution.py::test_source_notebook_runs_under_the_grader_within_the_cell_limit"
    "[08_tinylm_reinforce]": 59,
}


def work_unit(nodeid: str) -> str:
    """The unit xdist's ``--dist loadgroup`` hands out whole: the group after '@', else the test itself."""
    return nodeid.split("@")[-1] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def put_longest_first(items: list) -> None:
    """Reorder ``items`` in place: the measured units longest first, then the rest in their collection order."""
    items.sort(key=lambda item: -MEASURED_SECONDS.get(work_unit(item.nodeid), 0))  # a stable sort


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    timeline = os.environ.get("LMPOLICY_TEST_TIMELINE")
    started = time.time()
    yield
    if timeline:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(timeline, "a") as out:  # one short line per write: the two workers' lines never interleave
            out.write(f"{worker}\t{started:.2f}\t{time.time():.2f}\t{item.nodeid}\n")
