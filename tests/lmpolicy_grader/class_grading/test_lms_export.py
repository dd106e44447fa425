"""``python -m lmpolicy_grader export --lms canvas|moodle``: each file checked against its LMS's documented import
format (lmpolicy_grader.class_grading.lms_export cites where), on a real class graded by the grader
(``conftest.wrong_answers_class``): a complete student, pending hand grading, a FAILED notebook, a notebook not
submitted, a student of the roster who handed in nothing, and a graded student missing from the mapping."""
from __future__ import annotations

import csv

import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.__main__ import main
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.lms_export import (CANVAS_HEADER, MappingError, export_lms, read_mapping)
from lmpolicy_grader.class_grading.report import exercise_maxima

from .conftest import NOT_A_NOTEBOOK

# the roster: every graded student but no_max (left out on purpose), plus one who never handed anything in
MAPPING = """student_id,name,canvas_id,sis_user_id,sis_login_id,section,email,username
reference,"Lovelace, Ada",1001,S1001,ada,A,ada@uni.example,ada
whole_tensor,"Turing, Alan",1002,S1002,alan,A,alan@uni.example,alan
last_dim_only,"Hopper, Grace",1003,,,B,grace@uni.example,grace
only_01,"Shannon, Claude",1004,S1004,claude,B,claude@uni.example,claude
not_a_notebook,"Noether, Emmy",1005,S1005,emmy,B,emmy@uni.example,emmy
never_came,"Gauss, Carl",1006,S1006,carl,B,carl@uni.example,carl
"""
ROSTER = ["reference", "whole_tensor", "last_dim_only", "only_01", NOT_A_NOTEBOOK, "never_came"]


def _read(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _points(root, per_exercise=False):
    """{column title: points}, straight from the gradebook's grade cells."""
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        points = {}
        for notebook in gradebook.find_assignment("ch11").notebooks:
            maxima = exercise_maxima(notebook)
            points[notebook.name] = sum(maxima.values()) if not per_exercise else maxima
    return points


def check_canvas_format(table):
    """The Canvas Gradebook import CSV: Student, ID, SIS User ID, SIS Login ID, Section, then the items; the
    Points Possible row; each student identified by an ID, SIS User ID or SIS Login ID; each grade a number within
    the points, EX (excused) or empty (no change)."""
    header, points, *rows = table
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] == CANVAS_HEADER
    assert points[0].strip() == "Points Possible" and points[1:5] == ["", "", "", ""]
    possible = [float(p) for p in points[5:]]
    assert len(possible) == len(header) - 5 > 0
    for row in rows:
        assert len(row) == len(header)
        assert row[0] and any(row[1:4]), row
        for cell, most in zip(row[5:], possible):
            assert cell in ("", "EX") or 0 <= float(cell) <= most, (row, cell)
    return header, rows


def check_moodle_format(table, identifier="Email address"):
    """The Moodle CSV grade import: an identifier column, then the grade items; every row names a user, once; each
    grade a number or what load_data.php reads as no grade ('' or '-')."""
    header, *rows = table
    assert header[0] == identifier and len(header) > 1
    assert all(row[0] for row in rows) and len({row[0] for row in rows}) == len(rows)
    for row in rows:
        assert len(row) == len(header)
        for cell in row[1:]:
            assert cell in ("", "-") or float(cell) >= 0, (row, cell)
    return header, rows


@pytest.fixture
def mapping(tmp_path):
    path = tmp_path / "students.csv"
    path.write_text(MAPPING)
    return path


@pytest.mark.slow
@pytest.mark.xdist_group("wrong_answers_class")
def test_canvas_file_per_notebook(wrong_answers_class, mapping, tmp_path, capsys):
    root, _ = wrong_answers_class
    destination = tmp_path / "canvas.csv"
    assert main(["--course", str(root), "export", "--lms", "canvas", "--mapping", str(mapping),
                 "--to", str(destination)]) == 0
    printed = capsys.readouterr().out
    header, rows = check_canvas_format(_read(destination))
    points = _points(root)
    assert header[5:] == ["ch11 01_policy_softmax", "ch11 02_temperature"]
    assert _read(destination)[1][5:] == [f"{points['01_policy_softmax']:g}", f"{points['02_temperature']:g}"]
    cells = {row[0]: row for row in rows}
    assert [row[0] for row in rows] == ["Lovelace, Ada", "Turing, Alan", "Hopper, Grace", "Shannon, Claude",
                                        "Noether, Emmy", "Gauss, Carl"]  # the roster's order, one row each
    assert cells["Lovelace, Ada"][1:5] == ["1001", "S1001", "ada", "A"]
    # complete: every point (the reference's answers, its written ones marked by hand)
    assert cells["Lovelace, Ada"][5:] == [f"{points['01_policy_softmax']:g}", f"{points['02_temperature']:g}"]
    # written answers still to grade: no final grade, an empty cell (Canvas changes nothing)
    assert cells["Turing, Alan"][5:] == ["", ""]
    # FAILED: empty, never 0; the other notebook pending
    assert cells["Noether, Emmy"][5:] == ["", ""]
    # 02 not submitted: 0, as the report counts it (--missing zero, the default); a student with nothing: 0, 0
    assert cells["Shannon, Claude"][5:] == ["", "0"]
    assert cells["Gauss, Carl"][5:] == ["0", "0"]
    # graded but not in the mapping: not in the file, and said so
    assert "no_max" not in {row[0] for row in rows}
    assert "WARNING" in printed and "no_max" in printed
    assert "not_a_notebook: ch11 01_policy_softmax (FAILED)" in printed


@pytest.mark.slow
@pytest.mark.xdist_group("wrong_answers_class")
def test_canvas_file_excuses_missing_work_when_asked(wrong_answers_class, mapping, tmp_path):
    root, _ = wrong_answers_class
    written = export_lms(root, "canvas", mapping, tmp_path / "canvas.csv", missing="excused")
    _, rows = check_canvas_format(_read(written.path))
    by_name = {row[0]: row[5:] for row in rows}
    assert by_name["Shannon, Claude"] == ["", "EX"] and by_name["Gauss, Carl"] == ["EX", "EX"]
    assert by_name["Noether, Emmy"][0] == ""  # FAILED is never excused either: it waits for the instructor
    assert written.unmapped == ["no_max"]


@pytest.mark.slow
@pytest.mark.xdist_group("wrong_answers_class")
def test_moodle_file_per_exercise(wrong_answers_class, mapping, tmp_path):
    root, _ = wrong_answers_class
    written = export_lms(root, "moodle", mapping, tmp_path / "moodle.csv", per="exercise", missing="no-grade")
    header, rows = check_moodle_format(_read(written.path))
    points = _points(root, per_exercise=True)
    assert len(header) - 1 == sum(len(maxima) for maxima in points.values())  # one column per exercise
    assert [row[0] for row in rows] == ["ada@uni.example", "alan@uni.example", "grace@uni.example",
                                        "claude@uni.example", "emmy@uni.example", "carl@uni.example"]
    column = {title: i for i, title in enumerate(header)}
    softmax, logprob = "ch11 01_policy_softmax Exercise 01.softmax", "ch11 01_policy_softmax Exercise 11.1(a)"
    written_part = "ch11 01_policy_softmax Exercise 11.1(b)"
    by_email = {row[0]: row for row in rows}
    alan, emmy, carl = by_email["alan@uni.example"], by_email["emmy@uni.example"], by_email["carl@uni.example"]
    assert alan[column[softmax]] == "0"  # his wrong softmax: graded, 0 points
    assert alan[column[logprob]] == f"{points['01_policy_softmax']['ex11_1a']:g}"
    assert alan[column[written_part]] == "-"  # pending hand grading: no grade
    assert emmy[column[softmax]] == emmy[column[logprob]] == "-"  # FAILED: no grade, never 0
    assert set(carl[1:]) == {"-"}  # nothing handed in, --missing no-grade
    assert "0" not in emmy[1:4]
    assert all(cell not in ("", "-") for cell in by_email["ada@uni.example"][1:])  # complete: a number everywhere


@pytest.mark.slow
@pytest.mark.xdist_group("wrong_answers_class")
def test_moodle_by_username_and_no_excused_cell(wrong_answers_class, mapping, tmp_path):
    root, _ = wrong_answers_class
    written = export_lms(root, "moodle", mapping, tmp_path / "moodle.csv", moodle_identifier="username")
    header, rows = check_moodle_format(_read(written.path), identifier="Username")
    assert [row[0] for row in rows][:2] == ["ada", "alan"]
    assert {row[0]: row[1:] for row in rows}["claude"][1] == "0"  # 02 not submitted: 0 (--missing zero)
    with pytest.raises(ValueError, match="no excused cell"):
        export_lms(root, "moodle", mapping, tmp_path / "x.csv", missing="excused")


# --- the mapping file: errors that name the file and the row --------------------------------------

@pytest.mark.parametrize("content, words", [
    ("student_id,canvas_id\nada,1\nbob,2\nada,3\n", "rows 2 and 4: student 'ada' twice"),
    ("student_id,canvas_id\nada,1\n,2\n", "row 3: no student_id"),
    ("student_id,canvas_id,emial\nada,1,a@x\n", "row 1: unknown column(s) emial"),
    ("canvas_id\n1\n", "row 1: no 'student_id' column"),
    ("student_id,canvas_id\nada,1\nbob,1\n", "rows 2 and 3: canvas_id '1' given to two students"),
    ("student_id,email\nada,a@x\n", "row 1: no column for canvas"),
    ("student_id,canvas_id,sis_login_id\nada,1,\nbob,,\n", "row 3: student 'bob' has no canvas_id or sis_user_id"),
    ("student_id,canvas_id\nada,1,extra\n", "row 2: more cells than the header"),
])
def test_a_mapping_error_names_the_file_and_the_row(tmp_path, content, words):
    path = tmp_path / "roster.csv"
    path.write_text(content)
    with pytest.raises(MappingError) as raised:
        read_mapping(path, "canvas")
    assert str(raised.value).startswith(str(path)) and words in str(raised.value)


def test_a_moodle_mapping_needs_the_chosen_identifier_on_every_row(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("student_id,email,username\nada,ada@x,ada\nbob,,bob\n")
    assert read_mapping(path, "moodle", "username")["bob"]["username"] == "bob"
    with pytest.raises(MappingError, match=r"row 3: student 'bob' has no email"):
        read_mapping(path, "moodle", "email")
    with pytest.raises(MappingError, match="no such mapping file"):
        read_mapping(tmp_path / "absent.csv", "moodle")


def test_a_spreadsheets_byte_order_mark_and_blank_lines_are_fine(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_bytes("\ufeffstudent_id,canvas_id\nada,1\n,\n\nbob,2\n".encode())
    assert list(read_mapping(path, "canvas")) == ["ada", "bob"]


def test_the_command_refuses_a_bad_mapping_with_its_reason(tmp_path, repo_root):
    path = tmp_path / "roster.csv"
    path.write_text("student_id,canvas_id\nada,1\nada,2\n")
    with pytest.raises(SystemExit) as stopped:
        main(["--course", str(repo_root), "export", "--lms", "canvas", "--mapping", str(path),
              "--to", str(tmp_path / "out.csv")])
    assert "rows 2 and 3: student 'ada' twice" in str(stopped.value.code)
    assert not (tmp_path / "out.csv").exists()
