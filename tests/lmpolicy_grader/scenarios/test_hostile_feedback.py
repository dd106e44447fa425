"""Issue 34, door 4: a leaked hidden input is worthless, and none leaks. Notebook 01 graded twice with the real grader.

The first grading: an honest student, and a recorder whose softmax (right) records every input it is called with,
hidden ones included, and whose later cells try every way out to the feedback: a display made before the first test
rewritten from a later cell (``update_display``, 400 kB of it), a new display and an ``execute_result`` under the
same display id, ``clear_output(wait=True)`` then a display, stderr, a widget's value, and a visible check of 11.1(a)
whose call raises an exception (a class named after a recorded input) with the recorded inputs as its message. None
of them reaches the recorder's feedback; the instructor's autograded notebook holds what it printed.

The second grading: the recorder hands in a lookup table built from what it recorded (what an attacker reads in a
leaky feedback, read here from the instructor's copy): a softmax right on exactly those inputs and wrong on any
other. Its hidden inputs are drawn for the submission (``students.submission_digest``), so the table meets new
ones and softmax earns nothing; a copy of the recorder handed in unchanged is called with the very same inputs as
before, and the honest student, unchanged, keeps every point.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.isolation import sandbox

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile_feedback"),
              pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                                 reason=f"no sandbox here: {sandbox.sandbox_problem()}")]

NOTEBOOK = "01_policy_softmax"
SOFTMAX_CELL, LOGPROB_CELL = "nb01_softmax__answer", "ex11_1a__sequence_logprob"
SOFTMAX_TESTS, LOGPROB_TESTS = "nb01_softmax__tests", "ex11_1a__tests"
# The shapes of the hidden softmax checks' random inputs (drawn from hidden_seed(1101)); their fixed ones (+-inf, 1000)
# are the same for everyone, like the visible checks' inputs
RANDOM_SHAPES = {(4, 7), (2, 3, 5), (6, 2), (1, 9), (5,), (3, 4, 2), (8, 50)}
HANDED_IN_OUTPUT = "what alice saw in her own JupyterLab"

# Before the first test, within the code rule (a construct outside it would cost the tests below, and no test would
# call softmax): a right softmax that records every input, and a display to rewrite later.
RECORDS = '''import torch
_seen = []
_board = display({"text/plain": "nothing recorded yet"}, raw=True, display_id=True)
def softmax(logits, dim=-1):
    _seen.append([list(logits.shape), logits.detach().double().reshape(-1).tolist()])
    e = torch.exp(logits - logits.max(dim=dim, keepdim=True).values)
    return e / e.sum(dim=dim, keepdim=True)
'''
# 11.1(a)'s answer, within the rule too: its visible check calls it, and it raises with what softmax recorded, in an
# exception of a class named after a recorded input (the old grader quoted both in the check's verdict).
RAISES = '''def sequence_logprob(token_probs):
    values = [v for _, recorded in _seen for v in recorded]
    kind = type("Seen_" + f"{abs(values[-1]):.6f}".replace(".", "_"), (Exception,), {})
    raise kind("HIDDEN " + " ".join(f"{v:.6g}" for v in values)[-2000:])
'''
# After the last test (no test is left for a construct outside the rule to cost): every other way out.
LEAKS = '''import json, sys
import ipywidgets
from IPython.display import clear_output
_values = [v for _, values in _seen for v in values]
_text = " ".join(f"{v:.6g}" for v in _values)
display({"text/plain": _text}, raw=True, display_id=_board.display_id)  # a new display under the same id
_k = get_ipython().kernel
_k.session.send(_k.iopub_socket, "execute_result", {"execution_count": 1, "metadata": {}, "data": {"text/plain": _text},
                "transient": {"display_id": _board.display_id}}, parent=_k.get_parent(), ident=b"execute_result");
_board.update({"text/plain": (_text + " ") * (400_000 // max(1, len(_text)))}, raw=True)  # last: 400 kB, into cell 9
sys.stderr.write(_text)
clear_output(wait=True)
display({"text/plain": _text}, raw=True)
_w = ipywidgets.Text(value=_text)
display(_w)
_w.value = _text + " again"
print("RECORDED " + json.dumps(_seen))  # for the instructor's copy (and this test); after the clear_output above
'''
# The lookup table: right on exactly the inputs it recorded (TABLE is filled in), wrong on any other.
TABLE = '''import torch
TABLE = set(TABLE_KEYS)
def _key(logits):
    return (tuple(logits.shape), tuple(round(v, 9) for v in logits.detach().double().reshape(-1).tolist()))
def softmax(logits, dim=-1):
    if _key(logits) not in TABLE:
        return torch.full_like(logits, 0.5)
    e = torch.exp(logits - logits.max(dim=dim, keepdim=True).values)
    return e / e.sum(dim=dim, keepdim=True)
'''


def _submit(root, student, nb):
    folder = root / "submitted" / student / "ch11"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")


def _recorder(reference):
    nb = tiny_course.replace_answer(nbformat.from_dict(reference), SOFTMAX_CELL, RECORDS)
    nb = tiny_course.replace_answer(nb, LOGPROB_CELL, RAISES)
    nb.cells.append(nbformat.v4.new_code_cell(LEAKS))  # after the summary cell, the notebook's last
    return nb


def _scores(root, student) -> dict[str, float]:
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        grades = gradebook.find_submission_notebook(NOTEBOOK, "ch11", student).grades
        return {g.name: g.score for g in grades if g.cell_type == "code"}


def _recorded(root, student) -> list:
    """What the recorder's softmax was called with, as it printed it in the instructor's autograded notebook."""
    nb = nbformat.read(root / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    return json.loads(re.search(r"RECORDED (\[.*\])", printed).group(1))


def _hidden(recorded) -> list[float]:
    return [v for shape, values in recorded if tuple(shape) in RANDOM_SHAPES for v in values]


def _feedback(root, student) -> str:
    return html.unescape((root / "feedback" / student / "ch11" / f"{NOTEBOOK}.html").read_text())


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-feedback")
    reference = nbformat.read(tiny_course.one_notebook_course(root, NOTEBOOK), as_version=4)
    honest = nbformat.from_dict(reference)
    honest.cells[5].outputs = [nbformat.v4.new_output("stream", name="stdout", text=HANDED_IN_OUTPUT + "\n")]
    _submit(root, "honest", honest)
    for student in ("recorder", "recorder_again"):
        _submit(root, student, _recorder(reference))
    first = {o.student: o for o in grade_class(root, workers=2, log=lambda _: None)}
    assert {s: o.status for s, o in first.items()} == dict.fromkeys(first, Status.GRADED), first
    seen = {"scores": {s: _scores(root, s) for s in first}, "recorded": _recorded(root, "recorder"),
            "recorded_again": _recorded(root, "recorder_again"), "feedback": _feedback(root, "recorder"),
            "honest_feedback": _feedback(root, "honest"),
            "autograded": (root / "autograded" / "recorder" / "ch11" / f"{NOTEBOOK}.ipynb").read_text()}
    graded = nbformat.reads(seen["autograded"], as_version=4)
    seen["verdict"] = re.sub(r"\s+", " ", " ".join(" ".join(o.get("traceback", [])) for o in
                                                   graded.cells[tiny_course.cell_index(graded, LOGPROB_TESTS)].outputs))
    # the lookup table, from everything the recorder's softmax was called with at the first grading
    keys = sorted({(tuple(shape), tuple(round(v, 9) for v in values)) for shape, values in seen["recorded"]})
    table = tiny_course.replace_answer(nbformat.from_dict(reference), SOFTMAX_CELL,
                                       TABLE.replace("TABLE_KEYS", repr(keys).replace("inf", 'float("inf")')))
    _submit(root, "recorder", table)
    second = {o.student: o for o in grade_class(root, workers=2, log=lambda _: None)}
    assert {s: o.status for s, o in second.items()} == dict.fromkeys(second, Status.GRADED), second
    seen["regraded"] = {s: _scores(root, s) for s in second}
    table_graded = nbformat.read(root / "autograded" / "recorder" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    seen["table_errors"] = [o for o in table_graded.cells[tiny_course.cell_index(table_graded, SOFTMAX_CELL)].outputs
                            if o.output_type == "error"]
    seen["table_verdict"] = re.sub(r"\s+", " ", " ".join(" ".join(o.get("traceback", [])) for o in
                                   table_graded.cells[tiny_course.cell_index(table_graded, SOFTMAX_TESTS)].outputs))
    seen["regraded_recorded_again"] = _recorded(root, "recorder_again")
    seen["keys"] = keys
    return root, seen


def test_the_recorder_did_record_its_hidden_inputs_and_the_instructor_sees_them(course):
    _, seen = course
    hidden = _hidden(seen["recorded"])
    assert len(hidden) > 400  # notebook 01's hidden softmax checks: six random shapes and 8 x 50
    assert seen["scores"]["recorder"][SOFTMAX_TESTS] == 2.0  # its softmax is right: the hidden checks ran on it
    assert f"{hidden[0]:.6g}" in seen["autograded"]


def test_no_hidden_input_reaches_the_feedback_by_any_way_out(course):
    """Display update, same display id, execute_result with the id, clear then display, stderr, a widget, a class
    named after an input, an exception message quoted by a visible check: none reaches the student's feedback."""
    _, seen = course
    feedback = seen["feedback"]
    hidden = _hidden(seen["recorded"])
    assert tiny_course.numbers_shown(hidden, feedback) == []
    assert [v for v in hidden if f"{abs(v):.6f}".replace(".", "_") in feedback] == []
    # the words are in the cells' source, which the feedback shows; what followed them while graded is not
    assert not re.search(r"HIDDEN -?\d|Seen_\d|RECORDED \[", feedback)
    # not even what the cell showed while graded, before the first test: the words are there once, in its source
    assert feedback.count("nothing recorded yet") == 1


def test_the_visible_check_names_the_exception_by_kind_only(course):
    _, seen = course
    verdict = seen["verdict"]
    assert "raised an exception" in verdict and "HIDDEN" not in verdict and "Seen_" not in verdict, verdict
    assert "raised an exception (its message and line: run this check in your notebook)" in verdict
    assert "raised an exception" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", seen["feedback"]))


def test_the_display_update_stores_nothing_past_the_cap(course):
    """The 400 kB update is refused: the instructor's copy holds no more than the caps allow."""
    _, seen = course
    assert len(seen["autograded"]) < 400_000


def test_the_feedback_shows_the_outputs_as_handed_in(course):
    _, seen = course
    assert HANDED_IN_OUTPUT in seen["honest_feedback"]
    assert "what your code printed while it was graded is not part of the feedback" in seen["honest_feedback"]


def test_a_lookup_table_of_the_hidden_inputs_it_read_earns_nothing(course):
    _, seen = course
    assert seen["regraded"]["recorder"][SOFTMAX_TESTS] == 0.0
    # for the right reason: the table ran, and a hidden check met an input it had never seen (its answer there: 0.5)
    assert seen["table_errors"] == [], seen["table_errors"]
    assert re.search(r"softmax\(logits of shape \([\d, ]+\), dim=-?\d\) is off .* got 0\.5", seen["table_verdict"]), \
        seen["table_verdict"]
    # the table did hold every input of the first grading: with those it would have passed
    assert all((tuple(shape), tuple(round(v, 9) for v in values)) in set(seen["keys"]) for shape, values in seen["recorded"])


def test_an_unchanged_submission_regraded_meets_the_same_inputs_and_keeps_its_grade(course):
    _, seen = course
    assert seen["regraded_recorded_again"] == seen["recorded_again"]
    assert seen["regraded"]["recorder_again"] == seen["scores"]["recorder_again"]
    assert seen["scores"]["honest"] == seen["regraded"]["honest"] == {SOFTMAX_TESTS: 2.0, LOGPROB_TESTS: 3.0}
    assert _hidden(seen["recorded_again"]) != _hidden(seen["recorded"])  # the same notebook by another student
