"""OutputsAsHandedIn: the feedback shows each code cell's outputs as the student handed it in, never one made while
graded (before or after the first test), plus the grader's own lines."""
from __future__ import annotations

import nbformat
from traitlets.config import Config

from lmpolicy_grader.nbgrader_plugins.outputs_as_handed_in import NOTE_ID, OutputsAsHandedIn

HIDDEN = "0.4171"  # a hidden input the submission recorded while graded


def _code(source, *outputs, test=False):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = list(outputs)
    if test:
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1}
    return cell


def _stream(text, name="stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def _error(ename, evalue="", traceback=()):
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=list(traceback))


def _course(tmp_path, handed_in):
    """A course folder holding ``handed_in`` as alice's submitted 01_x.ipynb; the preprocessor's config and resources."""
    folder = tmp_path / "submitted" / "alice" / "ch11"
    folder.mkdir(parents=True)
    nbformat.write(handed_in, folder / "01_x.ipynb")
    config = Config({"CourseDirectory": {"root": str(tmp_path)}})
    return config, {"nbgrader": {"student": "alice", "assignment": "ch11", "notebook": "01_x"}}


def _handed_in():
    return nbformat.v4.new_notebook(cells=[
        _code("x = record()\nprint('mine')", _stream("mine\n")),
        _code("check()", _stream("✓ passed in my lab\n"), test=True),
        nbformat.v4.new_markdown_cell("text"),
        _code("h = display('ok', display_id=True)", nbformat.v4.new_output("display_data", data={"text/plain": "'ok'"})),
        _code("h.update(seen)\nraise ValueError(seen)"),
    ])


def _graded(handed_in):
    """The autograded notebook: the same cells, with what grading made: a display rewritten after the first test,
    prints and errors that carry a recorded hidden input, and the test cell's verdict."""
    nb = nbformat.from_dict(handed_in)
    nb.cells[0].outputs = [_stream(f"recorded {HIDDEN}\n")]
    nb.cells[1].outputs = [_stream("✓ verdict of the grader\n")]
    nb.cells[3].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": f"'{HIDDEN}'"})]
    nb.cells[4].outputs = [_stream(f"{HIDDEN}\n", "stderr"), _error("ValueError", HIDDEN, [f"ValueError: {HIDDEN}"])]
    return nb


def _texts(nb):
    return [[o.get("text") or o.get("data", {}).get("text/plain") or o.get("ename") for o in c.get("outputs", [])]
            for c in nb.cells]


def test_each_code_cell_shows_its_outputs_as_handed_in_and_the_tests_their_verdict(tmp_path):
    handed_in = _handed_in()
    config, resources = _course(tmp_path, handed_in)
    nb, _ = OutputsAsHandedIn(config=config).preprocess(_graded(handed_in), resources)
    assert nb.cells[0].id == NOTE_ID and nb.cells[0].cell_type == "markdown"
    assert _texts(nb)[1:] == [["mine\n"], ["✓ verdict of the grader\n"], [], ["'ok'"],
                              ["When graded, this cell raised ValueError.\n"]]
    assert HIDDEN not in nbformat.writes(nb)


def test_a_cell_whose_source_differs_from_the_one_handed_in_shows_nothing_of_it(tmp_path):
    """A locked cell the grader restored, or a submission replaced since it was graded: no outputs of other code."""
    handed_in = _handed_in()
    config, resources = _course(tmp_path, handed_in)
    graded = _graded(handed_in)
    graded.cells[0].source = "x = record()  # as the grader restored it"
    nb, _ = OutputsAsHandedIn(config=config).preprocess(graded, resources)
    assert _texts(nb)[1] == [] and _texts(nb)[4] == ["'ok'"]


def test_without_the_handed_in_notebook_no_output_at_all(tmp_path):
    config = Config({"CourseDirectory": {"root": str(tmp_path)}})
    resources = {"nbgrader": {"student": "alice", "assignment": "ch11", "notebook": "01_x"}}
    nb, _ = OutputsAsHandedIn(config=config).preprocess(_graded(_handed_in()), resources)
    assert _texts(nb)[1:] == [[], ["✓ verdict of the grader\n"], [], [], ["When graded, this cell raised ValueError."
                                                                            "\n"]]
    assert HIDDEN not in nbformat.writes(nb)


def test_an_exception_of_the_students_own_class_is_named_an_exception(tmp_path):
    """Its class's name is the submission's text: a class named after what it recorded."""
    handed_in = _handed_in()
    config, resources = _course(tmp_path, handed_in)
    graded = _graded(handed_in)
    graded.cells[4].outputs = [_error(f"Seen_{HIDDEN.replace('.', '_')}", "", [])]
    nb, _ = OutputsAsHandedIn(config=config).preprocess(graded, resources)
    assert _texts(nb)[5] == ["When graded, this cell raised an exception.\n"]
    assert HIDDEN.replace(".", "_") not in nbformat.writes(nb)


def test_handed_in_outputs_are_capped_too(tmp_path):
    handed_in = _handed_in()
    handed_in.cells[0].outputs = [_stream("x" * 10_000 + "\n") for _ in range(300)]  # 3 MB
    config, resources = _course(tmp_path, handed_in)
    nb, _ = OutputsAsHandedIn(config=config).preprocess(_graded(handed_in), resources)
    shown = nb.cells[1].outputs
    assert len(nbformat.writes(nb)) < 1_100_000 and "output cut at 1000000 bytes" in shown[-1].text


def test_a_figure_handed_in_is_shown_whole(tmp_path):
    """A figure as the course's notebooks show it (a PNG with its words, ``lmpolicy.notebook.figure``), of the size
    notebook 08's are: the student sees it in their feedback as they saw it in JupyterLab."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from lmpolicy.notebook.figure import described

    fig, ax = plt.subplots(figsize=(9, 4))
    ax.imshow(np.random.default_rng(0).random((150, 400)))  # noise: a PNG that compresses badly
    figure = nbformat.v4.new_output("display_data", data=described(fig, "noise, for its size"))
    plt.close(fig)
    handed_in = _handed_in()
    handed_in.cells[0].outputs = [figure]
    config, resources = _course(tmp_path, handed_in)
    nb, _ = OutputsAsHandedIn(config=config).preprocess(_graded(handed_in), resources)
    assert len(nbformat.writes(figure)) > 150_000
    assert nb.cells[1].outputs == [figure]


def test_a_demos_refusal_stays_and_nothing_dressed_as_one(tmp_path):
    from lmpolicy.demos.base import refusal

    real = refusal("TiltingDemo", "readouts()")._render_traceback_()
    carrying = refusal("TiltingDemo", f"readouts() {HIDDEN}")._render_traceback_()  # a recorded input inside
    handed_in = _handed_in()
    handed_in.cells += [_code(f"answer = demo.readouts()  # {n}") for n in range(3)]
    graded = _graded(handed_in)
    for cell, (ename, traceback) in zip(graded.cells[-3:], [("DemoNotAvailableWhileGrading", real),
                                                           ("DemoNotAvailableWhileGrading", carrying),
                                                           ("ValueError", real)]):
        cell.outputs = [_error(ename, "", traceback)]
    config, resources = _course(tmp_path, handed_in)
    nb, _ = OutputsAsHandedIn(config=config).preprocess(graded, resources)
    kept = [[o.get("traceback") for o in c.outputs if o.output_type == "error"] for c in nb.cells[-3:]]
    assert kept == [[real], [], []]
    assert [[o.get("text") for o in c.outputs if o.output_type == "stream"] for c in nb.cells[-2:]] == \
        [["When graded, this cell raised an exception.\n"], ["When graded, this cell raised ValueError.\n"]]
    assert HIDDEN not in nbformat.writes(nb)
