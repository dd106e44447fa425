"""Notebook 08 run by a student who has not written the three REINFORCE pieces yet.

The answer cells are as the release hands them out (nbgrader's own ClearSolutions: ``raise
NotImplementedError()`` bodies) and the hidden tests are gone (ClearHiddenTests). Every code cell runs in
order in one kernel, as a student stepping through the notebook runs it, errors and all. The cells that
need the student's pieces (section 5's run, its plot and section 6's comparison) must stop before training,
with one line that names the piece to write first; nothing of a training run (no progress bar) may appear,
and no cell may fail on a name the stopped run would have defined.
"""
import copy
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from lmpolicy.tinylm.model import CHECKPOINT_PATH
from tests.verdicts import one_line

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOK = ROOT / "source" / "ch11" / "08_tinylm_reinforce.ipynb"
PIECES = ("leave_one_out_baseline", "kl_penalized_rewards", "policy_gradient_loss")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A cell that trained would take minutes; one that stops at once takes seconds. The timeout only keeps a
# regression from running for long: nothing here is timed.
CELL_TIMEOUT = 240

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CHECKPOINT_PATH.exists() or not NOTEBOOK.exists(),
                                                   reason="needs the shipped checkpoint and notebook 08")]


def as_released(nb):
    """The cells as a student first gets them: solutions replaced by the stub, hidden tests removed."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

    nb = copy.deepcopy(nb)
    nb, _ = ClearSolutions().preprocess(nb, {})
    nb, _ = ClearHiddenTests().preprocess(nb, {})
    return nb


def answer_cell_index(nb, piece: str) -> int:
    (index,) = [i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith(f"__{piece}")]
    return index


def cells_needing_the_pieces(nb) -> list[int]:
    """The cells that need the student's pieces: those that train with them (they pass ``your_pieces`` to
    ``reinforce.train``) and the one that plots section 5's run."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "your_pieces" in c.source]


def run(client, nb, index: int) -> str | None:
    """Execute cell ``index`` of ``nb`` (its outputs are stored in it); the error's name, or None."""
    try:
        client.execute_cell(nb.cells[index], index)
    except CellExecutionError as error:
        return error.ename
    return None


def shown_error(cell) -> list[str]:
    """What the student reads under the cell: the error output's lines, colours removed."""
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    return [line for line in ANSI.sub("", "\n".join(error.traceback)).splitlines() if line.strip()]


def assert_stops_at_once_naming(cell, piece: str) -> None:
    lines = shown_error(cell)
    # one verdict, wrapped between words, not a traceback through the training loop
    assert lines[0].startswith("\u2717 Not written yet:") and all(line.startswith("  ") for line in lines[1:]), lines
    said = one_line(lines)
    assert f"write `{piece}` first" in said and f"def {piece}(" in said, lines
    others = [o for o in cell.outputs if o.output_type != "error"]
    assert not [o for o in others if o.output_type == "display_data"], "a progress bar appeared: it trained"
    assert not [o for o in others if o.output_type == "stream" and o.name == "stderr"], "it started a run"


def test_the_cells_that_train_with_the_pieces_say_at_once_which_to_write(tmp_path):
    source = nbformat.read(NOTEBOOK, as_version=4)
    nb = as_released(source)
    train_cells = cells_needing_the_pieces(nb)
    assert len(train_cells) == 3, "section 5's run, its plot and section 6's comparison"
    for piece in PIECES:
        assert "raise NotImplementedError()" in nb.cells[answer_cell_index(nb, piece)].source
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(tmp_path / "progress.json"))
    env.pop("NBGRADER_EXECUTION", None)  # as a student runs it: the long cells in full, were they to train
    client = NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    with client.setup_kernel(env=env):
        errors = {i: run(client, nb, i) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"}
        # nothing written: every cell that trains names the first piece
        for i in train_cells:
            assert errors[i] == "PieceNotWritten", (i, errors[i])
            assert_stops_at_once_naming(nb.cells[i], PIECES[0])
        # no cell below a stopped run trips over the name the run would have defined (`history`)
        assert "NameError" not in errors.values(), {i: e for i, e in errors.items() if e == "NameError"}

        # the first two pieces written (the reference answers), the loss not yet: the loss is named
        for piece in PIECES[:2]:
            index = answer_cell_index(nb, piece)
            nb.cells[index].source = source.cells[index].source
            assert run(client, nb, index) is None
        for i in train_cells:
            nb.cells[i].outputs = []
            assert run(client, nb, i) == "PieceNotWritten"
            assert_stops_at_once_naming(nb.cells[i], "policy_gradient_loss")
