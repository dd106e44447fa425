"""The class on the reward-KL plane (issue 37, item 3): each student's training run of notebook 08 where the grader
measured it, kept in the autograded notebook by the trusted test and read back by the report; the chapter's runs
read from notebook 08's prose; the class's figure next to grades.csv and each student's point in their feedback,
an image with its text alternative.

The figure and the words on recorded points; one real grading of notebook 08 (the slowest notebook: three
students) for the measurement and the report's whole path."""
from __future__ import annotations

import re
import shutil

import nbformat
import pytest
from markupsafe import escape
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from lmpolicy_grader.class_grading import measured_runs, reward_kl_plane
from lmpolicy_grader.class_grading.measured_runs import MIME_TYPE, NOTEBOOK, TEST_CELL, RunPoint
from lmpolicy_grader.class_grading.report import ExerciseRow
from lmpolicy_grader.class_grading.status import Status

PNG = b"\x89PNG\r\n\x1a\n"
RECORDED = {  # what the grader measured for a class of four (reward, KL)
    "ada": RunPoint(0.641, 0.021, 6, 6144, 0.558),
    "alan": RunPoint(0.603, 0.012, 6, 6144, 0.558),
    "grace": RunPoint(0.512, 0.048, 6, 6144, 0.558),
    "claude": RunPoint(0.655, 0.030, 6, 6144, 0.558),
}


def _test_cell(outputs, grade_id=TEST_CELL):
    cell = new_code_cell("hidden.policy_gradient_loss(policy_gradient_loss, globals())", outputs=outputs)
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": grade_id,
                                 "points": 3, "schema_version": 3}
    return cell


def _point_output(point: RunPoint):
    return new_output("display_data", data={MIME_TYPE: point.__dict__, "text/plain": "measured"})


def _recorded_course(root, points=RECORDED, pages=RECORDED):
    """A course whose autograded notebooks 08 hold ``points`` and whose feedback has a page for ``pages``."""
    for student, point in points.items():
        folder = root / "autograded" / student / "ch11"
        folder.mkdir(parents=True)
        nbformat.write(new_notebook(cells=[_test_cell([_point_output(point)])]), folder / f"{NOTEBOOK}.ipynb")
    for student in pages:
        folder = root / "feedback" / student / "ch11"
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.html").write_text(f"<html><body><main><h1>{NOTEBOOK}</h1></main></body></html>\n")
    return [ExerciseRow(s, NOTEBOOK, "nb08_pg_loss", 3.0, 3.0, Status.GRADED) for s in points]


def _blocks(page: str) -> list[str]:
    return re.findall(re.escape(reward_kl_plane.BEGIN) + ".*?" + re.escape(reward_kl_plane.END), page, re.DOTALL)


def _text_of(block: str) -> str:
    """A figure's block without its image's data (base64 may spell a name by chance)."""
    return re.sub(r"base64,[A-Za-z0-9+/=]+", "base64,", block)


# --- the chapter's runs ------------------------------------------------------------------------------------

def test_the_chapters_runs_are_read_from_notebook_08s_prose():
    runs = {run.label: run for run in reward_kl_plane.chapter_runs()}
    assert len(runs) == len(reward_kl_plane._CHAPTER_PHRASES) == 7
    start = runs["the shipped checkpoint"]
    assert start.kl == 0.0 and 0.5 < start.reward < 0.6
    later = [run for run in runs.values() if run is not start]
    assert all(run.reward > start.reward and 0.1 < run.kl < 1 for run in later)
    # what the prose says of them (and tests/notebooks/test_notebook08_figures.py of the runs themselves)
    assert runs["SFT on 40,960 worked examples"].kl == max(run.kl for run in later)
    assert runs["REINFORCE, beta = 0.2, 40,960 answers"].kl == min(run.kl for run in later)


def test_a_run_the_prose_no_longer_states_is_named(tmp_path):
    source = nbformat.read(reward_kl_plane.catalogue.source_folder() / f"{NOTEBOOK}.ipynb", as_version=4)
    for cell in source.cells:
        cell.source = cell.source.replace("it ends at KL", "it stops at KL")
    nbformat.write(source, tmp_path / f"{NOTEBOOK}.ipynb")
    with pytest.raises(reward_kl_plane.ChapterRunsNotFound, match="beta = 0.2"):
        reward_kl_plane.chapter_runs(tmp_path / f"{NOTEBOOK}.ipynb")


# --- the measurement, where it is kept ---------------------------------------------------------------------

def test_the_point_is_read_from_the_trusted_test_cells_output_only(tmp_path):
    real, forged = RunPoint(0.62, 0.02, 6, 6144, 0.558), RunPoint(0.99, 0.0, 6, 6144, 0.558)
    answer = new_code_cell("display(...)", outputs=[_point_output(forged)])  # the student's own cell printed one
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False,
                                   "grade_id": "nb08_pg_loss__policy_gradient_loss", "schema_version": 3}
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[answer, _test_cell([]), new_markdown_cell("x")]), path)
    assert measured_runs.read(path) is None
    other_test = _test_cell([_point_output(forged)], grade_id="nb08_baseline__tests")
    nbformat.write(new_notebook(cells=[answer, other_test, _test_cell([_point_output(real)])]), path)
    assert measured_runs.read(path) == real


# --- the figures and their words, on recorded points -------------------------------------------------------

def test_a_students_words_place_their_point_among_the_class():
    words = reward_kl_plane.student_words("alan", RECORDED)
    assert "0.603" in words and "0.012" in words
    assert "Of the 3 other runs in the class (grey dots, no names), 2 reached a higher expected reward and 1 did not" \
        in words
    assert "0 stayed closer to the reference (a smaller KL) and 3 moved as far or further" in words
    assert not any(name in words for name in RECORDED)
    alone = reward_kl_plane.student_words("ada", {"ada": RECORDED["ada"]})
    assert alone.endswith("It is the only run of the class measured so far.")


def test_the_plane_is_drawn_next_to_grades_csv_and_into_each_measured_students_feedback(tmp_path):
    rows = _recorded_course(tmp_path, pages=["ada", "alan", "grace"])  # claude's feedback was not written
    drawn = reward_kl_plane.draw(tmp_path, rows, "ch11")
    assert drawn.figure == tmp_path / reward_kl_plane.FIGURE and drawn.figure.read_bytes().startswith(PNG)
    assert sorted(p.parts[-3] for p in drawn.feedback) == ["ada", "alan", "grace"]
    assert "4 student run(s)" in drawn.lines[1] and "median" in drawn.lines[1]
    for student in ("ada", "alan", "grace"):
        page = (tmp_path / "feedback" / student / "ch11" / f"{NOTEBOOK}.html").read_text()
        (block,) = _blocks(page)
        words = escape(reward_kl_plane.student_words(student, RECORDED))
        assert f'alt="{words}"' in block and f"<figcaption>{words}</figcaption>" in block
        assert '<img src="data:image/png;base64,' in block
        assert not any(name in _text_of(block) for name in RECORDED)  # no names, the student's own neither
        at = [page.index(mark) for mark in ("<h1>", reward_kl_plane.BEGIN, reward_kl_plane.END, "</main>")]
        assert at == sorted(at)  # at the end of the page's main content
    # a second report leaves one figure per page, the class as it is then (grace's run no longer measured)
    (tmp_path / "autograded" / "grace" / "ch11" / f"{NOTEBOOK}.ipynb").unlink()
    reward_kl_plane.draw(tmp_path, rows, "ch11")
    later = {student: point for student, point in RECORDED.items() if student != "grace"}
    (block,) = _blocks((tmp_path / "feedback" / "ada" / "ch11" / f"{NOTEBOOK}.html").read_text())
    assert escape(reward_kl_plane.student_words("ada", later)) in block
    assert _blocks((tmp_path / "feedback" / "grace" / "ch11" / f"{NOTEBOOK}.html").read_text()) == []


def test_a_course_whose_prose_lost_a_run_gets_the_class_drawn_and_says_so(tmp_path):
    rows = _recorded_course(tmp_path)
    source = nbformat.read(reward_kl_plane.catalogue.source_folder() / f"{NOTEBOOK}.ipynb", as_version=4)
    for cell in source.cells:
        cell.source = cell.source.replace("both from 4,000 samples and exactly", "from 4,000 samples")
    (tmp_path / "source" / "ch11").mkdir(parents=True)
    nbformat.write(source, tmp_path / "source" / "ch11" / f"{NOTEBOOK}.ipynb")
    drawn = reward_kl_plane.draw(tmp_path, rows, "ch11")
    assert drawn.figure.exists() and len(drawn.feedback) == 4
    assert "the chapter's runs are not marked" in drawn.lines[-1] and "the shipped checkpoint" in drawn.lines[-1]


def test_no_measured_run_draws_nothing(tmp_path):
    rows = _recorded_course(tmp_path, points={}, pages=["ada"])
    assert reward_kl_plane.draw(tmp_path, rows, "ch11").figure is None
    assert not (tmp_path / reward_kl_plane.FIGURE).exists()
    assert reward_kl_plane.BEGIN not in (tmp_path / "feedback" / "ada" / "ch11" / f"{NOTEBOOK}.html").read_text()


# --- one real grading --------------------------------------------------------------------------------------

STUDENTS = ["ada", "advantages", "wrong_sign"]


@pytest.fixture(scope="module")
def graded_08(tmp_path_factory, repo_root):
    """Notebook 08 handed in by three students, graded with feedback, then reported: the reference (ada); a baseline
    that returns the advantages (its loss passes, so the grader trains with it); a loss with the wrong sign (its
    check fails before the hidden run)."""
    from lmpolicy_grader.__main__ import release, report
    from lmpolicy_grader.class_grading.examples_course import as_handed_in, with_answers, written_answers
    from lmpolicy_grader.class_grading.grading import grade_class
    from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS

    root = tmp_path_factory.mktemp("reward-kl-class")
    (root / "source" / "ch11").mkdir(parents=True)
    shutil.copy(repo_root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", root / "source" / "ch11")
    shutil.copy(repo_root / "nbgrader_config.py", root / "nbgrader_config.py")
    release(root)
    good = as_handed_in(nbformat.read(root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4),
                        nbformat.read(root / "release" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4),
                        written_answers(NOTEBOOK, "good"))
    def corpus(cell, why):
        return next(a for a in WRONG_ANSWERS if a.cell == cell and a.why.startswith(why))

    students = {"ada": [],  # the reference answers (a name that no sentence of the figure's words holds)
                "advantages": [corpus("nb08_baseline__leave_one_out_baseline", "returns the advantages r - b")],
                "wrong_sign": [corpus("nb08_pg_loss__policy_gradient_loss", "forgets the minus sign")]}
    for student, answers in students.items():
        folder = root / "submitted" / student / "ch11"
        folder.mkdir(parents=True)
        nbformat.write(with_answers(good, answers), folder / f"{NOTEBOOK}.ipynb")
    outcomes = grade_class(root, workers=2, feedback=True, log=lambda _: None)
    return root, outcomes, report(root)


@pytest.mark.slow
def test_grading_notebook_08_keeps_each_students_run_and_the_report_draws_the_class(graded_08):
    from lmpolicy_grader.hidden_tests.nb08 import LEAST_GAIN, SHORT_RUN

    root, outcomes, text = graded_08
    assert {o.student: o.status for o in outcomes} == dict.fromkeys(STUDENTS, Status.GRADED)
    points = measured_runs.class_points(root, STUDENTS, "ch11")
    assert sorted(points) == ["ada", "advantages"]  # the wrong sign failed its check: its run never started
    reference, wrong = points["ada"], points["advantages"]
    # the grader's run: its budget, from the shipped checkpoint, with each student's own pieces
    assert reference.updates == wrong.updates == SHORT_RUN.max_updates
    assert reference.start_reward == wrong.start_reward
    assert reference.reward - reference.start_reward > LEAST_GAIN and 0 < reference.kl < 1
    assert wrong.reward < reference.reward  # advantages that are the other answers' mean reward teach little
    # the report: the class's figure next to grades.csv and its words
    assert (root / reward_kl_plane.FIGURE).read_bytes().startswith(PNG) and (root / "grades.csv").exists()
    assert "The class on the reward-KL plane (notebook 08)" in text and "2 student run(s)" in text
    assert _blocks((root / "feedback" / "wrong_sign" / "ch11" / f"{NOTEBOOK}.html").read_text()) == []
    # each feedback: the student's point among the class, as an image with its words
    for student in points:
        page = (root / "feedback" / student / "ch11" / f"{NOTEBOOK}.html").read_text()
        (block,) = _blocks(page)
        words = escape(reward_kl_plane.student_words(student, points))
        assert f'alt="{words}"' in block and "Of the 1 other run in the class" in words
        assert not any(name in _text_of(block) for name in STUDENTS)
