"""lmpolicy.notebook.progress: the local record survives corruption, lists every exercise once, and a pass belongs
to the answer that passed."""
import json
import re
import shutil

import nbformat

import pytest

from lmpolicy.notebook import progress


@pytest.fixture
def progress_path(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "progress.json"
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(path))
    return path


def test_default_location_is_in_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("LMPOLICY_PROGRESS_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert progress.progress_file() == tmp_path / ".lmpolicy" / "progress.json"


def test_the_working_copy_is_the_configured_one_else_the_one_that_exists(monkeypatch, tmp_path):
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(tmp_path / "mine"))
    assert progress.working_copy() == tmp_path / "mine"
    monkeypatch.delenv("LMPOLICY_WORK_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(progress, "course_root", lambda: tmp_path / "course")
    local, fetched = tmp_path / "course" / "work" / "ch11", tmp_path / "home" / "ch11"
    assert progress.working_copy() == local  # neither exists yet: where `make lab` will put it
    fetched.mkdir(parents=True)
    assert progress.working_copy() == fetched  # nbgrader's Fetch on a hub
    local.mkdir(parents=True)
    assert progress.working_copy() == local


def test_record_then_load_round_trips_and_keeps_the_first_time(progress_path):
    assert progress.load() == {}
    progress.record("task2")
    first = progress.load()["task2"]
    progress.record("task2")
    progress.record("ex11_3c")
    assert progress.load() == {"task2": first, "ex11_3c": progress.load()["ex11_3c"]}
    data = json.loads(progress_path.read_text())
    assert data["version"] == 2
    # no temporary file left behind (the lock file may stay: it holds nothing)
    assert {p.name for p in progress_path.parent.iterdir()} - {"progress.json.lock"} == {"progress.json"}


def test_a_corrupt_file_is_moved_aside_with_a_warning_not_lost(progress_path):
    progress_path.parent.mkdir(parents=True)
    progress_path.write_text("{not json")
    with pytest.warns(progress.ProgressFileCorrupt, match="could not be read"):
        assert progress.load() == {}
    aside = [p for p in progress_path.parent.iterdir() if p.name.startswith("progress.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_text() == "{not json"
    progress.record("task1a")
    assert set(progress.load()) == {"task1a"}


def test_a_file_of_the_wrong_shape_counts_as_corrupt(progress_path):
    progress_path.parent.mkdir(parents=True)
    progress_path.write_text(json.dumps({"done": ["ex11_1a"]}))
    with pytest.warns(progress.ProgressFileCorrupt):
        assert progress.load() == {}


def test_unknown_keys_are_refused(progress_path):
    with pytest.raises(KeyError, match="unknown exercise key"):
        progress.record("ex11_11a")
    assert not progress_path.exists()


def test_the_exercise_list_covers_the_chapter_and_the_lab_once_each():
    keys = [exercise.key for exercise in progress.EXERCISES]
    assert len(keys) == len(set(keys))
    chapter = {int(m.group(1)) for k in keys if (m := re.fullmatch(r"ex11_(\d+)[a-z]?", k))}
    assert chapter == set(range(1, 11))
    assert {"task1a", "task1b", "task2", "task3", "task4", "task5"} <= set(keys)
    for exercise in progress.EXERCISES:
        assert re.fullmatch(r"(ex11_\d+[a-z]?|task\d[ab]?|nb\d\d_[a-z0-9_]+)", exercise.key), exercise.key
        assert re.fullmatch(r"\d\d_[a-z0-9_]+", exercise.notebook), exercise.notebook
    labels = [exercise.label for exercise in progress.EXERCISES]
    assert len(labels) == len(set(labels)), "two exercises read the same to a student"


def release_cells(name):
    return nbformat.read(progress.release_dir() / f"{name}.ipynb", as_version=4).cells


def grade_cells(name) -> list:
    return [c for c in release_cells(name) if c.metadata.get("nbgrader", {}).get("grade")]


def cell_points(name) -> float:
    """The notebook's points, summed over its graded cells' metadata."""
    return sum(float(c.metadata["nbgrader"]["points"]) for c in grade_cells(name))


def test_table_has_a_row_per_graded_cell_and_totals_per_notebook_and_course(progress_path):
    progress.record("ex11_2b")
    rows = progress.table()
    assert len(rows) == sum(len(grade_cells(name)) for name in progress.NOTEBOOKS) + len(progress.NOTEBOOKS) + 1
    status = {(label, part): state for label, _, part, _, state in rows}
    assert status["Exercise 11.2(b)", "visible check"] == "passed"
    assert status["Exercise 11.2(a)", "written answer"] == "still empty"
    # 07's written question has its own row, under the exercise it belongs to
    assert status["Lab Task 1b", "visible check"] == "not attempted"
    assert status["Lab Task 1b", "written answer"] == "still empty"
    totals = {label: (items, points) for label, _, items, points, _ in rows if label.startswith(("notebook", "course"))}
    worth = next(float(c.metadata["nbgrader"]["points"]) for c in grade_cells("02_temperature")
                 if grade_id(c) == "ex11_2b__tests")
    for name in progress.NOTEBOOKS:
        done_items, done_points = (1, worth) if name == "02_temperature" else (0, 0)
        assert totals[f"notebook {name}"] == (f"{done_items} of {len(grade_cells(name))} items done",
                                              f"{done_points:g} of {cell_points(name):g}")
    assert totals["course total"][1] == f"{worth:g} of {sum(cell_points(n) for n in progress.NOTEBOOKS):g}"
    html = rows._repr_html_()
    assert html.count("<tr") == len(rows) + 1 and '<td style="text-align:left">passed</td>' in html
    assert "Exercise 11.2(b)" in str(rows)
    # a title's `code` shows as code, not as backquotes
    assert "<code>sample_with_temperature</code>" in html and "`" not in html


def grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


@pytest.fixture
def working_copy(tmp_path, monkeypatch):
    """A student's copy of the release, as `make lab` makes it."""
    copy = tmp_path / "work" / "ch11"
    shutil.copytree(progress.release_dir(), copy)
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(copy))
    return copy


def write_answer(copy, name, grade_id, text):
    path = copy / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    cell.source = text
    nbformat.write(nb, path)


def test_a_written_answer_is_written_graded_by_hand_once_its_cell_holds_more_than_the_placeholder(
        progress_path, working_copy):
    def state_of(grade_id):
        (state,) = [s for s in progress.item_states("01_policy_softmax") if s.item.grade_id == grade_id]
        return state

    assert state_of("ex11_1b__manual").status == "still empty"
    write_answer(working_copy, "01_policy_softmax", "ex11_1b__manual", "  YOUR ANSWER HERE \n")
    assert not state_of("ex11_1b__manual").done
    write_answer(working_copy, "01_policy_softmax", "ex11_1b__manual", "By the chain rule, ...")
    written = state_of("ex11_1b__manual")
    # in, for the instructor to grade: never "done" here, and nothing left for the student to do
    assert not written.done and written.status == "written (graded by hand)" and written.settled
    assert written.mark == "\u270e"
    # a question the release put into the answer cell is not an answer either (notebook 08)
    question = [c.source for c in release_cells("08_tinylm_reinforce")
                if c.metadata.get("nbgrader", {}).get("grade_id") == "ex11_10__why_manual"][0]
    write_answer(working_copy, "08_tinylm_reinforce", "ex11_10__why_manual", question + "\n\n")
    (why,) = [s for s in progress.item_states("08_tinylm_reinforce") if s.item.grade_id == "ex11_10__why_manual"]
    assert why.status == "still empty"


def test_a_failing_check_clears_done_and_a_pass_restores_it(progress_path):
    progress.record("task3", check="cellA")
    first = progress.load()["task3"]
    progress.record_failure("task3", "kl_estimators(...) returned NaN\nHint: clamp", check="cellA")
    assert progress.load() == {}
    assert progress.load_record()["checks"]["task3"]["cellA"]["reason"] == "kl_estimators(...) returned NaN"
    progress.record("task3", check="cellA")
    assert "task3" in progress.load() and progress.load()["task3"] >= first


def test_an_exercise_with_two_checks_is_done_only_when_both_pass(progress_path):
    progress.record("task4", check="tilted")
    progress.record_failure("task4", "kl_objective(...) is off", check="objective")
    assert "task4" not in progress.load()
    progress.record("task4", check="objective")
    assert "task4" in progress.load()


def test_running_the_answer_with_other_code_marks_its_passed_check_changed(progress_path):
    progress.record("task2", check="c", answer={"answer-cell": progress.fingerprint("def f(): return 1")})
    progress.record_answer_run("task2", "answer-cell", progress.fingerprint("def f(): return 1  \n"))
    assert "task2" in progress.load()
    progress.record_answer_run("task2", "other-cell", progress.fingerprint("x = 2"))  # not the answer it ran on
    assert "task2" in progress.load()
    progress.record_answer_run("task2", "answer-cell", progress.fingerprint("def f(): return 2"))
    assert progress.load() == {}
    assert progress.load_record()["checks"]["task2"]["c"]["state"] == "changed"


def test_a_version_1_file_is_read_and_kept(progress_path):
    progress_path.parent.mkdir(parents=True)
    progress_path.write_text(json.dumps({"version": 1, "done": {"ex11_3b": "2026-01-01T00:00:00+00:00"}}))
    assert progress.load() == {"ex11_3b": "2026-01-01T00:00:00+00:00"}
    (state,) = [s for s in progress.item_states("04_two_mdp_views") if s.item.exercise.key == "ex11_3b"]
    assert state.status == "passed"
    progress.record("task2", check="c")  # written back as version 2, the old entry kept
    data = json.loads(progress_path.read_text())
    assert data["version"] == 2 and data["done"]["ex11_3b"] == "2026-01-01T00:00:00+00:00"


def test_a_file_from_a_newer_format_is_moved_aside_not_overwritten(progress_path):
    progress_path.parent.mkdir(parents=True)
    progress_path.write_text(json.dumps({"version": 99, "done": {}}))
    with pytest.warns(progress.ProgressFileCorrupt, match="version 99"):
        assert progress.load() == {}
    (aside,) = [p for p in progress_path.parent.iterdir() if ".corrupt-" in p.name]
    assert json.loads(aside.read_text())["version"] == 99


@pytest.mark.parametrize("name", progress.chapter().notebooks)
def test_each_notebooks_summary_has_a_line_per_graded_cell(name, progress_path, monkeypatch, tmp_path):
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(tmp_path / "no-copy"))  # the release: nothing done yet
    lines = progress.notebook_summary(name).splitlines()
    assert lines[0] == f"{name}: 0 of {len(grade_cells(name))} items done (0 of {cell_points(name):g} points)"
    assert len(lines) == len(grade_cells(name)) + 2
    assert all(line.endswith(("not attempted", "still empty")) for line in lines[1:-1])


def test_a_summary_of_an_unknown_notebook_names_the_known_ones(progress_path):
    with pytest.raises(ValueError, match="no graded cells found for notebook '09_nope'.*01_policy_softmax"):
        progress.notebook_summary("09_nope")


def test_kernels_recording_at_the_same_time_lose_nothing(progress_path):
    """Two notebooks' kernels record at once: every record survives (the file lock serialises them)."""
    import multiprocessing

    keys = [ex.key for ex in progress.EXERCISES[:12]]
    assert len(keys) == 12
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        pool.starmap(progress.record, [(key, f"check-{key}") for key in keys])
    assert set(progress.load()) == set(keys)


STABLE = "def softmax(logits, dim=-1):\n    shifted = logits - logits.max(dim=dim, keepdim=True).values\n" \
         "    return shifted.exp() / shifted.exp().sum(dim=dim, keepdim=True)\n"
UNSHIFTED = "def softmax(logits, dim=-1):\n    return logits.exp() / logits.exp().sum(dim=dim, keepdim=True)\n"


def softmax_state(**kwargs):
    (state,) = [s for s in progress.item_states("01_policy_softmax", **kwargs) if s.item.exercise.key == "nb01_softmax"]
    return state


def test_a_pass_belongs_to_the_answer_it_passed_on_as_the_saved_notebook_shows(progress_path, working_copy):
    check = next(c.source for c in release_cells("01_policy_softmax") if grade_id(c) == "nb01_softmax__tests")
    write_answer(working_copy, "01_policy_softmax", "nb01_softmax__answer", STABLE)
    progress.record("nb01_softmax", progress.fingerprint(check), {"nb01_softmax__answer": progress.fingerprint(STABLE)})
    assert softmax_state().done and softmax_state().status == "passed"

    write_answer(working_copy, "01_policy_softmax", "nb01_softmax__answer", UNSHIFTED)  # saved, never run
    assert not softmax_state().done
    assert softmax_state().status == progress.SAVED_OTHER_STATUS
    assert progress.SAVED_OTHER_STATUS.startswith("changed since its check passed: run the check")
    summary = progress.notebook_summary("01_policy_softmax").splitlines()
    assert summary[0].startswith("01_policy_softmax: 0 of ")
    assert "\u2717 Exercise 01.softmax visible check  " + progress.SAVED_OTHER_STATUS in summary
    rows = {row[0]: row for row in progress.table()}
    assert rows["Exercise 01.softmax"][4] == progress.SAVED_OTHER_STATUS

    write_answer(working_copy, "01_policy_softmax", "nb01_softmax__answer", STABLE + "   \n")  # the same code again
    assert softmax_state().done


def test_a_pass_recorded_without_its_answer_stays_passed(progress_path, working_copy):
    """A check recorded by a script or by an older lmpolicy names no answer cell: nothing to compare."""
    check = next(c.source for c in release_cells("01_policy_softmax") if grade_id(c) == "nb01_softmax__tests")
    progress.record("nb01_softmax", progress.fingerprint(check))
    write_answer(working_copy, "01_policy_softmax", "nb01_softmax__answer", UNSHIFTED)
    assert softmax_state().status == "passed"


def test_a_deleted_answer_cell_is_not_the_answer_that_passed(progress_path, working_copy):
    check = next(c.source for c in release_cells("01_policy_softmax") if grade_id(c) == "nb01_softmax__tests")
    progress.record("nb01_softmax", progress.fingerprint(check), {"nb01_softmax__answer": progress.fingerprint(STABLE)})
    path = working_copy / "01_policy_softmax.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if grade_id(c) != "nb01_softmax__answer"]
    nbformat.write(nb, path)
    assert softmax_state().status == progress.SAVED_OTHER_STATUS


def test_an_answer_run_again_with_other_code_shows_changed_with_what_to_do(progress_path):
    progress.record("task2", check="c", answer={"answer-cell": progress.fingerprint("def f(): return 1")})
    progress.record_answer_run("task2", "answer-cell", progress.fingerprint("def f(): return 2"))
    runs = {"c": progress.load_record()["checks"]["task2"]["c"]}
    item = progress.GradedItem(progress.exercise("task2"), "task2__tests", False, 3.0, "", "")
    assert progress._check_state(item, {progress.fingerprint(""): runs["c"]}, {}) == (
        False, "changed since its check passed: run the check")


def test_the_exercises_are_read_from_the_notebooks_of_the_course(monkeypatch, tmp_path):
    """Source first (instructors, `make lab`), else the release, else the student's copy (a hub's student image)."""
    monkeypatch.setattr(progress, "course_root", lambda: tmp_path / "course")
    monkeypatch.setenv("LMPOLICY_WORK_DIR", str(tmp_path / "fetched"))
    assert progress.catalogue_folder() is None
    assert progress.exercise("ex11_1a").label == "Exercise 11.1(a)"  # a grading sandbox: the key's own label
    shutil.copytree(progress.catalogue.source_folder(), tmp_path / "fetched")
    assert progress.catalogue_folder() == tmp_path / "fetched"
    assert progress.exercise("ex11_1a").notebook == "01_policy_softmax"
    with pytest.raises(KeyError, match="unknown exercise key 'ex11_1z'"):
        progress.exercise("ex11_1z")
    shutil.copytree(tmp_path / "fetched", tmp_path / "course" / "source" / "ch11")
    assert progress.catalogue_folder() == tmp_path / "course" / "source" / "ch11"
