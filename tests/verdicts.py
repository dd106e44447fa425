"""Reading a verdict whatever its wrapping: lmpolicy.notebook.verdict_lines breaks long lines between words, so a test
that looks for a phrase reads the verdict as one line."""
from __future__ import annotations


def one_line(shown: str | list[str]) -> str:
    """``shown`` (a text, or its lines) with every run of spaces and line breaks made one space."""
    return " ".join((shown if isinstance(shown, str) else "\n".join(shown)).split())
