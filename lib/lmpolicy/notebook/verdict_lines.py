"""A verdict's lines wrapped between words, at a width that fits wherever a student reads them.

JupyterLab breaks an output line that is too long anywhere, in the middle of a word ("run it firs" / "t."), and
nbgrader's Validate dialog does not break it at all. So every ✗ line the course shows (a failed check, a name not
defined yet, a training loop stopped by a piece) is wrapped here first, at ``WIDTH`` characters: what ``nbgrader
validate`` prints a verdict in (its 90 columns, less an indent of 4), so that the command line re-wraps nothing and
shows the lines the notebook shows. A notebook's output area holds about 108 at 1280 px with the file browser open,
the Validate dialog about 115.
"""
from __future__ import annotations

import re
import textwrap

WIDTH = 86
CONTINUATION = "  "  # the further indent of the rest of a line too long for one
# every CSI escape sequence, as nbconvert's strip_ansi (which the validator used) reads them, not colours alone; its
# own copy, since importing nbconvert would cost every kernel that imports lmpolicy.notebook.checks about 0.3 s
ANSI_CODE = re.compile(r"\x1b\[(.*?)([@-~])")


def strip_ansi(text: str) -> str:
    return ANSI_CODE.sub("", text)


def wrap(text: str, width: int = WIDTH, indent: str = "") -> str:
    """Each line of ``text`` wrapped at ``width`` visible characters, its rest indented a little further.

    ANSI colour codes count as nothing. The course colours only the start of a line ("✗ Check failed:"): the
    first piece gets that coloured start back (a line coloured anywhere else is wrapped without its colours)."""
    lines = []
    for line in text.splitlines():
        plain = strip_ansi(line)
        pieces = textwrap.wrap(plain, width, initial_indent=indent, subsequent_indent=indent + CONTINUATION,
                               break_on_hyphens=False, break_long_words=False) or [indent]
        if plain != line:
            coloured = line[:list(ANSI_CODE.finditer(line))[-1].end()]  # up to the last code: the coloured start
            first = pieces[0][len(indent):]
            if first.startswith(strip_ansi(coloured)):
                pieces[0] = indent + coloured + first[len(strip_ansi(coloured)):]
        lines += pieces
    return "\n".join(lines)


def wrapped(lines: list[str], width: int = WIDTH) -> list[str]:
    """``lines`` as lines of at most ``width`` visible characters (a word longer than that keeps its own line)."""
    return wrap("\n".join(lines), width).split("\n") if lines else []
