"""The class on the reward-KL plane: every student's training run of notebook 08 where the grader measured it
(``measured_runs``), the chapter's own runs marked, one figure for the instructor and one per student.

The chapter's runs are read from where notebook 08 states them, its prose (``chapter_runs``); the prose is
checked against the runs its cells make (``tests/notebooks/test_notebook08_figures.py``), so the numbers are
the seeded runs' own, never typed again here. The class's runs are the grader's short run (6 updates of 256
prompts, 6,144 answers); the chapter's are longer (50 updates, or 40,960 answers).

``draw`` writes ``reward_kl_plane.png`` next to ``grades.csv`` and, in the feedback of each student it has a point
for, their point among the class (no names) as an image with a text alternative: the figure is rendered by
``templates/feedback/reward_kl_plane.html.j2`` into the notebook's feedback page, in place of any earlier one,
so each report run leaves the figure of the class as it is then.
"""
from __future__ import annotations

import base64
import io
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
import nbformat

from lmpolicy.notebook import catalogue
from lmpolicy_grader.class_grading.measured_runs import NOTEBOOK, RunPoint, class_points

FIGURE = "reward_kl_plane.png"
TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "feedback"
FEEDBACK_TEMPLATE = "reward_kl_plane.html.j2"
BEGIN, END = "<!-- lmpolicy: the class on the reward-KL plane -->", "<!-- lmpolicy: end of the reward-KL plane -->"
_BLOCK = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END) + r"\n?", re.DOTALL)


# --- the chapter's runs, from notebook 08's prose ---------------------------------------------------------

@dataclass(frozen=True)
class ChapterRun:
    label: str
    reward: float
    kl: float


_NUMBER = r"(\d+\.\d+)"
# (label, the prose's bullet or sentence it is in (None: anywhere), its reward's pattern, its KL's pattern):
# the phrases tests/notebooks/test_notebook08_figures.py checks against the seeded runs
_CHAPTER_PHRASES = (
    ("the shipped checkpoint", None, _NUMBER + r", both from 4,000 samples and exactly", None),
    ("REINFORCE, beta = 0.02, at its targets (section 5)", None,
     r"the sampled accuracy rose from \d\.\d+ to " + _NUMBER, r"KL stayed near [\d.]+ nats \(\d\.\d+, then " + _NUMBER),
    ("REINFORCE, beta = 0.02, 40,960 answers", "**The leash.**",
     r"sampled " + _NUMBER + r" and \d\.\d+, KL", r"KL " + _NUMBER + r" and \d\.\d+ nats"),
    ("REINFORCE, beta = 0, 40,960 answers", "**The leash.**",
     r"sampled \d\.\d+ and " + _NUMBER + r", KL", r"KL \d\.\d+ and " + _NUMBER + r" nats"),
    ("REINFORCE, beta = 0.2, 40,960 answers", "**The leash.**",
     r"and sampled accuracy " + _NUMBER, r"it ends at KL " + _NUMBER + r" nats"),
    ("rejection-sampling FT, 40,960 answers", "**Rejection sampling**",
     r"\(greedy \d\.\d+, sampled " + _NUMBER + r"\)", r"\(KL " + _NUMBER + r" nats\)"),
    ("SFT on 40,960 worked examples", "**SFT on true answers**",
     r"\(greedy \d\.\d+, sampled " + _NUMBER + r"\)", r"reference \(KL " + _NUMBER + r" nats\)"),
)


class ChapterRunsNotFound(ValueError):
    """Notebook 08's prose no longer states a run where ``chapter_runs`` reads it."""


def _prose_parts(source: Path) -> tuple[str, dict[str, str]]:
    """Notebook 08's markdown as one line, and each bullet that starts with a bold heading by its heading."""
    cells = nbformat.read(source, as_version=4).cells
    prose = " ".join(" ".join(c.source.split()) for c in cells if c.cell_type == "markdown")
    bullets = {}
    for cell in cells:
        if cell.cell_type == "markdown":
            for bullet in re.split(r"\n\* ", "\n" + cell.source):
                words = " ".join(bullet.split())
                if words.startswith("**"):
                    bullets[words[:words.index("**", 2) + 2]] = words
    return prose, bullets


def _found(pattern: str, text: str, label: str) -> float:
    match = re.search(pattern, text)
    if match is None:
        raise ChapterRunsNotFound(f"notebook 08's prose no longer states {label} as /{pattern}/")
    return float(match.group(1))


def chapter_runs(source: Path | None = None) -> list[ChapterRun]:
    """The chapter's runs where notebook 08 (``source``: the course's source notebook) says they end."""
    source = source or catalogue.source_folder() / f"{NOTEBOOK}.ipynb"
    prose, bullets = _prose_parts(source)
    runs = []
    for label, where, reward, kl in _CHAPTER_PHRASES:
        if where is not None and where not in bullets:
            raise ChapterRunsNotFound(f"notebook 08's prose has no bullet {where} (it states {label})")
        text = prose if where is None else bullets[where]
        runs.append(ChapterRun(label, _found(reward, text, label), 0.0 if kl is None else _found(kl, text, label)))
    return runs


# --- the figures -------------------------------------------------------------------------------------------

LINEAR_UP_TO = 1.0  # nats: a wider KL axis is drawn as the chapter's KL-placement figures draw theirs
CHAPTER_MARKERS = "*sDP^vX"  # the checkpoint a star, each later run its own shape (told apart without colour)


def figure(points: dict[str, RunPoint], chapter: list[ChapterRun], highlight: str | None = None):
    """The class's points (grey), the chapter's runs (black, one shape each) and ``highlight``'s point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lmpolicy.tinylm.kl_placement import kl_axis

    fig, ax = plt.subplots(figsize=(9.5, 6.2))
    others = [p for student, p in points.items() if student != highlight]
    if others:
        updates = others[0].updates
        ax.scatter([p.kl for p in others], [p.reward for p in others], s=28, color="0.55", alpha=0.8,
                   label=f"the class: the grader's run ({updates} updates), one dot a student"
                   if highlight is None else "your classmates' runs")
    for run, marker in zip(chapter, CHAPTER_MARKERS):
        ax.scatter([run.kl], [run.reward], marker=marker, s=55, color="black", clip_on=False,
                   label=f"chapter: {run.label}")
    if highlight is not None:
        mine = points[highlight]
        ax.scatter([mine.kl], [mine.reward], s=150, color="tab:orange", edgecolor="black", zorder=5,
                   label="your run (the grader's, with your pieces)")
    largest = max([p.kl for p in points.values()] + [r.kl for r in chapter] + [0.1])
    if largest > LINEAR_UP_TO:  # a run that collapsed: hundredths of a nat and nats on one axis
        kl_axis(ax, "x", largest)
        scale = " (linear up to 0.1, logarithmic above)"
    else:
        ax.set_xlim(0, largest * 1.1)
        scale = ""
    ax.set(xlabel=f"KL from the reference, nats per answer{scale}",
           ylabel="expected sampled accuracy (held-out)", title="The class on the reward-KL plane")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


# --- the words -------------------------------------------------------------------------------------------

def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def class_words(points: dict[str, RunPoint], chapter: list[ChapterRun]) -> str:
    """The class figure in words (its text alternative)."""
    if not points:
        return "No student's run of notebook 08 was measured yet."
    rewards, kls = [p.reward for p in points.values()], [p.kl for p in points.values()]
    updates = next(iter(points.values())).updates
    said = (f"{len(points)} student run(s), each the grader's {updates}-update run with the student's pieces: "
            f"expected reward median {_median(rewards):.3f} (from {min(rewards):.3f} to {max(rewards):.3f}), KL "
            f"median {_median(kls):.3f} nats (from {min(kls):.3f} to {max(kls):.3f}).")
    if chapter:
        said += " The chapter's runs: " + "; ".join(f"{r.label} at reward {r.reward:.3f}, KL {r.kl:.3f}"
                                                   for r in chapter) + "."
    return said


def student_words(student: str, points: dict[str, RunPoint]) -> str:
    """Where ``student``'s point is among the class, in words (the alt text of their figure)."""
    mine = points[student]
    others = [p for name, p in points.items() if name != student]
    said = f"Your run ({mine.words()}) is the orange dot."
    if not others:
        return said + " It is the only run of the class measured so far."
    higher = sum(p.reward > mine.reward for p in others)
    closer = sum(p.kl < mine.kl for p in others)
    runs = "run" if len(others) == 1 else "runs"
    return (f"{said} Of the {len(others)} other {runs} in the class (grey dots, no names), {higher} reached a higher "
            f"expected reward and {len(others) - higher} did not; {closer} stayed closer to the reference (a "
            f"smaller KL) and {len(others) - closer} moved as far or further. The black shapes are the chapter's "
            "runs, named in the legend.")


# --- the report's figure and the feedback's ---------------------------------------------------------------

def _feedback_block(environment: jinja2.Environment, png: bytes, words: str) -> str:
    html = environment.get_template(FEEDBACK_TEMPLATE).render(
        image=base64.b64encode(png).decode("ascii"), words=words)
    return f"{BEGIN}\n{html.strip()}\n{END}\n"


def into_feedback(page: str, block: str) -> str:
    """``page`` (a feedback page) with ``block`` as its reward-KL plane, in place of an earlier one: at the end of
    its main content (nbgrader's feedback page has one ``<main>``), else of its body."""
    page = _BLOCK.sub("", page)
    at = page.rfind("</main>")
    at = page.rfind("</body>") if at < 0 else at
    return page + block if at < 0 else page[:at] + block + page[at:]


@dataclass
class Drawn:
    """What ``draw`` made: the report's lines, the class figure (None: no point), the feedback pages written."""
    lines: list[str]
    figure: Path | None
    feedback: list[Path]


def draw(course_root: Path, rows, assignment: str) -> Drawn:
    """The class's plane next to grades.csv, and each measured student's point in their notebook 08 feedback
    (``rows``: ``report.exercise_rows``; a student counts when their notebook 08 was autograded)."""
    from lmpolicy_grader.class_grading.status import Status

    course_root = Path(course_root)
    students = {r.student for r in rows if r.notebook == NOTEBOOK and r.status in (Status.GRADED, Status.PENDING)}
    points = class_points(course_root, students, assignment)
    for student in students - set(points):  # no run measured now: no figure of an earlier class either
        page = course_root / "feedback" / student / assignment / f"{NOTEBOOK}.html"
        if page.exists() and BEGIN in (text := page.read_text(encoding="utf-8")):
            page.write_text(_BLOCK.sub("", text), encoding="utf-8")
    if not points:
        return Drawn([], None, [])
    source = course_root / "source" / assignment / f"{NOTEBOOK}.ipynb"
    try:
        chapter, unmarked = chapter_runs(source if source.exists() else None), []
    except ChapterRunsNotFound as error:  # the class is drawn all the same; the report says what is missing
        chapter, unmarked = [], [f"  the chapter's runs are not marked: {error}"]
    path = course_root / FIGURE
    path.write_bytes(_png(figure(points, chapter)))
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    written = []
    for student in points:
        page = course_root / "feedback" / student / assignment / f"{NOTEBOOK}.html"
        if page.exists():
            block = _feedback_block(environment, _png(figure(points, chapter, highlight=student)),
                                    student_words(student, points))
            page.write_text(into_feedback(page.read_text(encoding="utf-8"), block), encoding="utf-8")
            written.append(page)
    lines = ["The class on the reward-KL plane (notebook 08)", "  " + class_words(points, chapter),
             f"  wrote {path}; the notebook 08 feedback of {len(written)} student(s) shows their point among the class",
             *unmarked]
    return Drawn(lines, path, written)
