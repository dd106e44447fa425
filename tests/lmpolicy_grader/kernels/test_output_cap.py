"""What a cell may print while graded (kernels.output_cap): an allowlist of the kernel messages that become outputs,
each counted against the cell's cap and the notebook's. One small notebook graded by GradingExecute (no sandbox: the
messages are the kernel's either way), its cells each an attack on the notebook's outputs."""
from __future__ import annotations

import json

import nbformat
import pytest
from traitlets.config import Config

from lmpolicy_grader.incidents import INCIDENTS
from lmpolicy_grader.nbgrader_plugins.grading_execute import GradingExecute

HIDDEN = "4171"  # what the later cells would write into the earlier ones: a recorded hidden input
CELL_CAP = 20_000

CELLS = {
    "displayed": "from IPython.display import display, clear_output\nh = display({'text/plain': 'before'}, raw=True, display_id=True)",
    "test": "assert True  # the first test",
    # after it, every way to change the earlier output or store something past the caps
    # a new display under the same id: nbclient would rewrite every earlier output of that id
    "same_id": f"_ = display({{'text/plain': '{HIDDEN}'}}, raw=True, display_id=h.display_id)",
    # an execute_result carrying the id, sent by hand on the kernel's own iopub socket
    "result_with_id": ("k = get_ipython().kernel\n"
                       "k.session.send(k.iopub_socket, 'execute_result', {'execution_count': 1, 'metadata': {},"
                       f" 'data': {{'text/plain': '{HIDDEN}'}}, 'transient': {{'display_id': h.display_id}}}},"
                       " parent=k.get_parent(), ident=b'execute_result');"),
    # update_display_data sent by hand, too
    "raw_update": ("k.session.send(k.iopub_socket, 'update_display_data', {'metadata': {},"
                   f" 'data': {{'text/plain': '{HIDDEN}'}}, 'transient': {{'display_id': h.display_id}}}},"
                   " parent=k.get_parent(), ident=b'update_display_data');"),
    # then rewrite the earlier output in place, 400 kB of it
    "update": f"h.update({{'text/plain': '{HIDDEN}' * 100_000}}, raw=True)",
    # a widget: its state would go into the notebook's metadata
    "widget": f"import ipywidgets\nw = ipywidgets.IntText(value={HIDDEN})\ndisplay(w)\nw.value = {HIDDEN} + 1",
    # clear, then print again and again: each print counts, cleared or not
    "clears": "for i in range(2000):\n    clear_output(wait=True)\n    print('y' * 100)",
    # many tiny outputs
    "tiny": "for i in range(5000):\n    display({'text/plain': ''}, raw=True)",
    "stderr": "import sys\nsys.stderr.write('e' * 200_000)",
    "last": "print('still runs')",
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    cells = []
    for name, source in CELLS.items():
        cell = nbformat.v4.new_code_cell(source)
        if name == "test":
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1}
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    config = Config({"GradingKernelManager": {"sandbox": False},
                     "GradingExecute": {"max_output_bytes": CELL_CAP, "max_notebook_output_bytes": 120_000}})
    execute = GradingExecute(config=config, spare_kernels=False)
    resources = {"nbgrader": {"notebook": "01_policy_softmax"}, "metadata": {"path": str(tmp_path_factory.mktemp("nb"))}}
    INCIDENTS.clear()
    graded = execute.preprocess(nb, resources)[0]
    return {name: cell for name, cell in zip(CELLS, graded.cells)}, graded, list(INCIDENTS)


def _size(outputs) -> int:
    return len(json.dumps(outputs))


def test_no_later_cell_rewrites_an_earlier_output(graded):
    cells, _, _ = graded
    assert [o.get("data") for o in cells["displayed"].outputs] == [{"text/plain": "before"}]
    assert not [o for c in cells.values() for o in c.outputs if "transient" in o or "display_id" in json.dumps(o)]


def test_a_display_update_is_refused_and_its_400_kB_stored_nowhere(graded):
    cells, nb, _ = graded
    assert cells["update"].outputs == [] and cells["raw_update"].outputs == []
    assert len(nbformat.writes(nb)) < 200_000


def test_a_display_or_result_under_an_old_id_is_an_output_of_its_own_cell_only(graded):
    cells, _, _ = graded
    assert [o.data for o in cells["same_id"].outputs] == [{"text/plain": HIDDEN}]
    assert [o.data for o in cells["result_with_id"].outputs] == [{"text/plain": HIDDEN}]


def test_no_widget_state_is_stored(graded):
    _, nb, _ = graded
    assert "widgets" not in nb.metadata and HIDDEN not in json.dumps(nb.metadata)


def test_every_output_counts_against_the_caps_cleared_tiny_or_on_stderr(graded):
    cells, _, incidents = graded
    for name in ("clears", "tiny", "stderr"):
        assert _size(cells[name].outputs) < CELL_CAP + 1_000, name
    assert "output cut" in cells["tiny"].outputs[-1].text and len(cells["tiny"].outputs) < CELL_CAP // 64 + 2
    assert "output cut" in cells["stderr"].outputs[-1].text
    assert {i["kind"] for i in incidents} == {"output cut"}


def test_the_notebook_as_a_whole_is_capped_and_its_cells_still_run(graded):
    cells, nb, _ = graded
    assert sum(_size(c.outputs) for c in nb.cells) < 120_000 + 10 * 1_000
    assert cells["last"].execution_count is not None  # it ran, its output past the notebook's cap
    assert [o.text for o in cells["last"].outputs][-1].strip().startswith("... output cut at 120000 bytes per notebook")
