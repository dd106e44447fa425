"""What a cell may print: the kernel messages that may become outputs (an allowlist), each one capped.

Mixed into an nbclient client (``Execute``), it sits in front of nbclient's ``process_message``, the one
place every iopub message of the running cell goes through:

- Only ``stream``, ``display_data``, ``execute_result`` and ``error`` become outputs, and only of the cell
  that is running: their ``transient`` part (the display id) is taken off first. With a display id,
  nbclient would let any later message carrying the same id rewrite the earlier output in place, in an
  earlier cell too (a cell run before the first test, rewritten after it with what the tests handed
  over). ``clear_output`` still clears the running cell's own outputs, and ``status`` and
  ``execute_input`` still drive the cell's execution. Everything else is dropped: ``update_display_data``,
  comm messages (widget state, which nbclient would store in the notebook's metadata, and the Output
  widget's redirection of later outputs), and any message type not listed here.
- Every message that reaches the notebook, a ``clear_output`` included, is counted (its content's size,
  at least ``MESSAGE_FLOOR_BYTES``, so that many tiny outputs count too) against the cell's cap and the
  notebook's. Past either, nothing more of that cell is kept, and one line says where it was cut.
- An error is what makes a test cell score 0, so a cell that raised keeps it past any cap (nbgrader's
  ``Execute`` adds the kernel's error reply to a cell left without its error output), cut to the cell's cap:
  a verdict quoting a value a submission made as long as it likes stays a verdict, and stays small.
"""
from __future__ import annotations

import json

import nbformat
from traitlets import Int
from traitlets.config import Configurable

from lmpolicy_grader.incidents import Incident, note

# The messages that may become an output of the running cell; the display id is stripped from each.
OUTPUT_MESSAGES = frozenset({"stream", "display_data", "execute_result", "error"})
# The messages that drive the running cell: its state, its input echo, clearing its own outputs.
CELL_MESSAGES = frozenset({"status", "execute_input", "clear_output"})
# What one message costs at least, whatever its size: 10,000 empty prints count as 640 kB, not as nothing.
MESSAGE_FLOOR_BYTES = 64


class OutputCap(Configurable):
    """Mixed into an nbclient client (``Execute``): only allowlisted messages become outputs, each cell keeps at most
    ``max_output_bytes`` of them and the notebook at most ``max_notebook_output_bytes``."""

    max_output_bytes = Int(100_000, help="output kept per cell; the rest is dropped while it streams").tag(config=True)
    max_notebook_output_bytes = Int(2_000_000, help="output kept per notebook, all cells together; past it every "
                                                    "later output is dropped").tag(config=True)
    notebook_name = ""  # named in the incident that reports a cut

    def process_message(self, msg, cell, cell_index):
        msg_type = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
        if msg_type in ("status", "execute_input"):
            return super().process_message(msg, cell, cell_index)
        if msg_type not in OUTPUT_MESSAGES | CELL_MESSAGES:
            return None  # update_display_data, comm_*, anything new: never an output, never a change of one
        content = {key: value for key, value in (msg.get("content") or {}).items() if key != "transient"}
        if not self._within_cap(cell, cell_index, content):
            return None
        return super().process_message({**msg, "content": content}, cell, cell_index)

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                _cut_error(output, self.max_output_bytes)
        return cell, resources

    def _within_cap(self, cell, cell_index: int, content: dict) -> bool:
        """Count ``content`` against the cell's and the notebook's caps; False (and the cut said once) past either."""
        used = self.__dict__.setdefault("_output_bytes", {})
        size = max(MESSAGE_FLOOR_BYTES, len(json.dumps(content, default=str)))
        cell_used, notebook_used = used.get(cell_index, 0), used.get(None, 0)
        used[cell_index], used[None] = cell_used + size, notebook_used + size
        if cell_used + size <= self.max_output_bytes and notebook_used + size <= self.max_notebook_output_bytes:
            return True
        cut = self.__dict__.setdefault("_cut_cells", set())
        if cell_index not in cut:
            cut.add(cell_index)
            cap, what = ((self.max_output_bytes, "cell") if cell_used + size > self.max_output_bytes
                         else (self.max_notebook_output_bytes, "notebook"))
            cell.outputs.append(nbformat.v4.new_output(
                "stream", name="stdout", text=f"\n... output cut at {cap} bytes per {what} by the grader ...\n"))
            note(Incident.OUTPUT_CUT, self.notebook_name, f"cell {cell_index} printed past the {what}'s {cap} bytes")
        return False

    def reset_output_cap(self) -> None:
        self.__dict__["_output_bytes"], self.__dict__["_cut_cells"] = {}, set()


CUT = " ... (cut by the grader)"


def _cut(text, room: int) -> str:
    text = str(text)
    return text if len(text) <= room else text[:max(0, room)] + CUT


def _cut_error(output, limit: int) -> None:
    """Cut an error output to about ``limit`` characters: its value to half of them, its traceback (what a page
    shows) to the other half, line by line in order."""
    output["ename"] = _cut(output.get("ename", ""), 200)
    output["evalue"] = _cut(output.get("evalue", ""), limit // 2)
    room, lines = limit // 2, []
    for line in output.get("traceback") or []:
        if room <= 0:
            lines.append(CUT.strip())
            break
        lines.append(_cut(line, room))
        room -= len(lines[-1])
    if "traceback" in output:
        output["traceback"] = lines
