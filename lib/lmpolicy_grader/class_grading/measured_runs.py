"""Where a student's training run ended on the reward-KL plane, as the grader measured it.

Notebook 08's hidden test of the policy-gradient loss trains TinyLM with the student's three pieces in a short
seeded run (``hidden_tests.nb08.SHORT_RUN``), in the trusted kernel, with the library's loop and evaluation.
``show`` puts that run's final held-out expected reward (the exact expected sampled accuracy) and KL from the
reference into the test cell's outputs, as one output of its own type (``MIME_TYPE``); nbgrader keeps it in the
autograded notebook, and ``read`` takes it back from there for the report.

Why there: the autograded notebook is where the grader already keeps what a test cell found (the failing
reasons of ``pitfalls`` come from the same place); nbgrader clears every output of a submission before it runs
it, and a test cell is locked and run in the trusted kernel, so the output of the test cell is the grader's own
and nothing the notebook printed; a re-grade writes it afresh with the grade. The gradebook has no field for it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

from lmpolicy_grader.cells import is_test

MIME_TYPE = "application/vnd.lmpolicy.reward-kl+json"
NOTEBOOK = "08_tinylm_reinforce"
TEST_CELL = "nb08_pg_loss__tests"  # the test cell whose hidden part trains with the student's pieces


@dataclass(frozen=True)
class RunPoint:
    """A run's end on the plane: ``reward``, the exact expected verifier reward of sampling at T = 1 on the
    held-out problems; ``kl``, KL(pi || pi_ref) per answer in nats; after ``updates`` updates and ``answers``
    sampled answers; ``start_reward`` where the shipped checkpoint started."""

    reward: float
    kl: float
    updates: int
    answers: int
    start_reward: float

    @classmethod
    def of(cls, history) -> "RunPoint":
        """The end of a ``lmpolicy.tinylm.runs.History``."""
        return cls(float(history.sampled[-1]), float(history.kl[-1]), int(history.updates[-1]),
                   int(history.answers[-1]), float(history.sampled[0]))

    def words(self) -> str:
        return (f"after {self.updates} updates ({self.answers:,} sampled answers) the held-out expected reward is "
                f"{self.reward:.3f} (from {self.start_reward:.3f}) and the KL from the reference {self.kl:.3f} nats "
                "per answer")


def show(point: RunPoint) -> None:
    """Put ``point`` into the outputs of the test cell running now (in the trusted kernel), with its words
    for whoever reads the cell."""
    from IPython.display import display

    display({MIME_TYPE: asdict(point), "text/plain": f"The grader's run with your three pieces: {point.words()}."},
            raw=True)


def read(autograded_notebook: Path) -> RunPoint | None:
    """The point the grader recorded in an autograded notebook 08 (None: its run did not end, or it has none)."""
    nb = nbformat.read(autograded_notebook, as_version=4)
    for cell in nb.cells:
        if not is_test(cell) or cell.metadata.nbgrader.grade_id != TEST_CELL:  # run by the trusted kernel only
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {}) if output.get("output_type") == "display_data" else {}
            if MIME_TYPE in data:
                try:
                    return RunPoint(**{name: type_(data[MIME_TYPE][name]) for name, type_ in
                                       (("reward", float), ("kl", float), ("updates", int), ("answers", int),
                                        ("start_reward", float))})
                except (KeyError, TypeError, ValueError):
                    return None
    return None


def class_points(course_root: Path, students, assignment: str) -> dict[str, RunPoint]:
    """{student: their point} for the ``students`` whose autograded notebook 08 holds one."""
    points = {}
    for student in sorted(students):
        path = Path(course_root) / "autograded" / student / assignment / f"{NOTEBOOK}.ipynb"
        if path.exists():
            point = read(path)
            if point is not None:
                points[student] = point
    return points
