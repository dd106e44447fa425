"""What a cell may print: an nbclient client's output, cut at a cap while it streams."""
from __future__ import annotations

import json

import nbformat
from traitlets import Int
from traitlets.config import Configurable

from lmpolicy_grader.incidents import Incident, note


class OutputCap(Configurable):
    """Mixed into an nbclient client (``Execute``): each cell keeps at most ``max_output_bytes`` of output."""

    max_output_bytes = Int(100_000, help="output kept per cell; the rest is dropped while it streams").tag(config=True)
    notebook_name = ""  # named in the incident that reports a cut

    def output(self, outs, msg, display_id, cell_index):
        sizes = self.__dict__.setdefault("_output_bytes", {})
        size = len(json.dumps(msg.get("content", {})))
        used = sizes.get(cell_index, 0)
        sizes[cell_index] = used + size
        if used + size > self.max_output_bytes:
            if used <= self.max_output_bytes:
                outs.append(nbformat.v4.new_output("stream", name="stdout",
                                                   text=f"\n... output cut at {self.max_output_bytes} bytes by the grader ...\n"))
                note(Incident.OUTPUT_CUT, self.notebook_name, f"cell {cell_index} printed more than {self.max_output_bytes} bytes")
            return None
        return super().output(outs, msg, display_id, cell_index)

    def reset_output_cap(self) -> None:
        self.__dict__["_output_bytes"] = {}
