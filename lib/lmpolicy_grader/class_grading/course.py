"""The course folder as the grader reads it: its configuration, its notebooks and students, and the
outcome of each notebook's last grading (``grading_status.json``). Nothing here starts a cluster or a
kernel, so the report, the export and formgrader read it without the grader's heavy parts.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from lmpolicy_grader.class_grading.status import Status

ASSIGNMENT = "ch11"
STATUS_FILE = "grading_status.json"


@dataclass
class Outcome:
    """How grading one student's notebook went."""
    student: str
    notebook: str
    status: Status              # GRADED, FAILED or MISSING
    reason: str = ""            # why it failed, in words an instructor can act on
    incidents: list = field(default_factory=list)  # timeouts, restored cells, cut output
    seconds: float = 0.0
    warnings: list = field(default_factory=list)   # what the grader warned of itself meanwhile (GraderWarnings)

    def __post_init__(self):
        self.status = Status(self.status)  # read back from grading_status.json as a plain string


def load_config(course_root: Path):
    """The course's nbgrader configuration (``<course_root>/nbgrader_config.py``) as a traitlets Config."""
    from traitlets.config.loader import PyFileConfigLoader
    return PyFileConfigLoader("nbgrader_config.py", path=str(course_root)).load_config()


def assignment_notebooks(course_root: Path, assignment: str = ASSIGNMENT) -> list[str]:
    """Notebook names of the assignment, from its release (``make release`` writes it)."""
    release = Path(course_root) / "release" / assignment
    names = sorted(p.stem for p in release.glob("*.ipynb"))
    if not names:
        raise FileNotFoundError(f"no notebooks in {release}: run `python -m lmpolicy_grader release` first")
    return names


def submitted_students(course_root: Path, assignment: str = ASSIGNMENT) -> list[str]:
    submitted = Path(course_root) / "submitted"
    return sorted(p.parent.name for p in submitted.glob(f"*/{assignment}") if p.is_dir())


def invalid_notebook_reason(path: Path) -> str | None:
    """Why a submitted notebook cannot be graded (None if it can)."""
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # JSON or schema error: say which, briefly
        return f"invalid notebook: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return None


def save_outcomes(course_root: Path, outcomes: list[Outcome]) -> None:
    """Merge ``outcomes`` into ``grading_status.json`` (the latest outcome per student and notebook wins)."""
    path = Path(course_root) / STATUS_FILE
    known = {(o["student"], o["notebook"]): o for o in load_outcomes_raw(path)}
    known.update({(o.student, o.notebook): asdict(o) for o in outcomes})
    path.write_text(json.dumps(sorted(known.values(), key=lambda o: (o["student"], o["notebook"])), indent=1) + "\n")


def load_outcomes_raw(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text()) if Path(path).exists() else []


def load_outcomes(course_root: Path) -> list[Outcome]:
    return [Outcome(**raw) for raw in load_outcomes_raw(Path(course_root) / STATUS_FILE)]
