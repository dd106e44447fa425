"""The start page's first output: who the student is, whose numbers they get, and how far they are, shown
when the page is opened, before anything runs.

``overview()`` is what the page's first cell (tagged ``OVERVIEW_TAG``) shows when run. The student's Jupyter server
puts it into that cell's output as the page is opened (``lmpolicy.notebook.served_notebooks``), so the page never
shows an earlier one. The words are the progress table's (``lmpolicy.notebook.progress``), which are the checks' own.
"""
from __future__ import annotations

import datetime
import html
import os
from pathlib import Path

from lmpolicy.notebook.progress import (Count, ItemState, as_html, chapter, item_label, item_states, load_record,
                                        working_copy)


def identity() -> str:
    """One sentence (markdown-free text) saying who the student is here and whose numbers they get."""
    from lmpolicy.per_student import variants  # the one reading of the student's id

    student = variants.student_id()
    if student is not None:
        source = ("your hub user name" if not os.environ.get(variants.STUDENT_ID_VARIABLE, "").strip()
                  else "set by `make lab STUDENT=...`")
        return (f"You are {student} (student id {source}): the numeric exercises give you your own numbers, "
                f"drawn from this id.")
    if variants.variants_off():
        return "No student id: the course gives everyone the chapter's numbers in the numeric exercises."
    return (f"No student id is set, so the numeric exercises show the chapter's numbers, not your own: for yours, "
            f"{variants.SET_ID_HOW}.")


class Overview:
    """The start page's first output: ``identity()``, then one row per notebook (items done, points, the first
    item not done with its state, in the table's words) and the course's total: one screen."""

    HEADER = ("notebook", "items done", "points", "next to do")

    def __init__(self, who: str, rows: list[tuple], total: tuple, when: str, source: Path):
        self.who, self.rows, self.total, self.when, self.source = who, rows, total, when, source

    def _repr_html_(self) -> str:
        def cells(row, first_tag):
            first = (f'<{first_tag} scope="row" style="text-align:left">'
                     f'{as_html(row[0])}</{first_tag}>')
            # the counts never break (a narrow column wrapped "0 of 119"): the words of the last column do
            return first + "".join(f'<td style="text-align:left{"; white-space:nowrap" if i < 2 else ""}">{as_html(c)}</td>'
                                   for i, c in enumerate(row[1:]))

        head = "".join(f'<th scope="col" style="text-align:left">{html.escape(h)}</th>' for h in self.HEADER)
        body = "".join(f"<tr>{cells(row, 'th')}</tr>" for row in self.rows)
        foot = f"<tr style=\"font-weight:bold\">{cells(self.total, 'th')}</tr>"
        return (f'<p class="lmpolicy-who"><strong>{as_html(self.who)}</strong></p>'
                f'<table class="lmpolicy-overview"><caption style="text-align:left">Your progress as of {self.when} '
                f"(every item: the table under <em>Your progress</em>)"
                f"</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody><tfoot>{foot}</tfoot></table>")

    def __str__(self) -> str:
        rows = [self.HEADER, *self.rows, self.total]
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(self.HEADER))]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join([self.who, f"Your progress as of {self.when}:", *lines])

    def __repr__(self) -> str:
        return str(self)


def _next_to_do(states: list[ItemState]) -> str:
    waiting = next((s for s in states if not s.settled), None)
    if waiting is None:
        return "nothing: every check passed, every written answer in"
    return f"{item_label(waiting, states)} {waiting.part}: {waiting.status}"


def overview() -> Overview:
    """Who the student is and, per notebook, how far they are (``Overview``), from the record and saved copies."""
    data = load_record()
    rows, everything = [], []
    for name in chapter().notebooks:
        states = item_states(name, data)
        count = Count.of_states(states)
        rows.append((name, count.items(short=True), count.points, _next_to_do(states)))
        everything += states
    count = Count.of_states(everything)
    total = ("course total", count.items(short=True), count.points, "")
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M")
    return Overview(identity(), rows, total, when, working_copy())


OVERVIEW_TAG = "lmpolicy-overview"  # the start page's cell that shows the overview


def with_overview(notebook) -> bool:
    """Put ``overview()`` as the output of ``notebook``'s cell tagged ``OVERVIEW_TAG`` (an nbformat notebook, changed
    in place), as if it had just run; False, and nothing changed, when no cell has the tag."""
    import nbformat

    cell = next((c for c in notebook.cells if OVERVIEW_TAG in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return False
    shown = overview()
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": shown._repr_html_(),
                                                                 "text/plain": str(shown)})]
    cell.execution_count = None
    return True
