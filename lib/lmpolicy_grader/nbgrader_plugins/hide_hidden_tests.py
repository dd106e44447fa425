"""Feedback: the hidden tests leave the feedback, and so do their lines in tracebacks.

A failing test cell's traceback depends on which part failed (``GradingExecute`` recorded the line
that raised). A hidden test: the traceback becomes a note that a hidden check failed, and nothing of its
message, which may quote the hidden test's hint and the values it computed from its hidden inputs (or that
the submission returned: an answer that hands its input back would read the input there); the instructor
sees the message in the autograded notebook, and ``show_hidden_message`` puts it in the feedback too. A
visible check: its traceback stays (the student can read and rerun that check), minus any line of the hidden
tests it may quote. An error that no test line raised (a submission out of reach, a timeout, the code rule): its
message alone, under its check's heading when it is one of the checks' failures ("✗ Not allowed: ...").
"""
from __future__ import annotations

import re

from traitlets import Bool, Unicode

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests

from lmpolicy.notebook import checks
from lmpolicy.notebook.verdict_lines import wrap
from lmpolicy_grader.cells import failed_line

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class HideHiddenTests(ClearHiddenTests):
    """Feedback: hidden tests removed from the cell, and from the traceback of its failure."""

    hidden_failure_note = Unicode(
        "✗ Your answer passes the visible checks but fails one of the hidden checks, whose details stay hidden:\n"
        "  try it on inputs the visible checks do not use (other shapes, sizes, signs, extreme values).",
        help="what the feedback shows of a failed hidden check").tag(config=True)
    show_hidden_message = Bool(False, help="show the failed hidden check's message above the note; it may quote the "
                                           "hidden test's hint and values computed from its hidden inputs, or that "
                                           "the submission returned for them").tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if not utils.is_grade(cell) or cell.cell_type != "code":
            return cell, resources
        hidden_lines = self._hidden_line_numbers(cell.source)
        source_lines = cell.source.split("\n")
        hidden_text = {source_lines[n - 1].strip() for n in hidden_lines} - {""}
        if not self._remove_hidden_test_region(cell):
            return cell, resources
        line = failed_line(cell)
        for output in cell.get("outputs", []):
            if output.output_type != "error":
                continue
            if line is None:  # not a test that raised (out of reach, a timeout, the code rule): its message only
                output.traceback = [_message_alone(output.ename, output.evalue)]
            elif line in hidden_lines:
                message = [f"{output.ename}: {output.evalue}"] if self.show_hidden_message else []
                output.ename, output.evalue = "HiddenCheckFailed", self.hidden_failure_note
                output.traceback = [*message, self.hidden_failure_note]
            else:
                output.traceback = [_without(entry, hidden_text) for entry in output.traceback]
        return cell, resources

    def _hidden_line_numbers(self, source: str) -> set[int]:
        """1-based numbers of the lines from each begin delimiter to its end delimiter, both included."""
        numbers, inside = set(), False
        for number, text in enumerate(source.split("\n"), start=1):
            if self.begin_test_delimeter in text:
                inside = True
            if inside:
                numbers.add(number)
            if self.end_test_delimeter in text:
                inside = False
        return numbers


def _without(entry: str, hidden_text: set[str]) -> str:
    """A traceback entry (one frame, several lines) without the lines that quote a hidden test."""
    return "\n".join(line for line in entry.split("\n")
                     if not any(text in _ANSI.sub("", line) for text in hidden_text))


def _check_headings(kind=checks.CheckFailed) -> dict[str, str]:
    """The checks' failure classes by name -> the heading their verdict starts with."""
    found = {kind.__name__: kind.heading}
    for subclass in kind.__subclasses__():
        found |= _check_headings(subclass)
    return found


def _message_alone(ename: str, evalue: str) -> str:
    """An error's message as the feedback shows it: a check's failure as its verdict, anything else by its name."""
    heading = _check_headings().get(ename)
    return wrap(f"✗ {heading}: {evalue}") if heading else f"{ename}: {evalue}"
