"""docs/instructors.md: the grader commands it shows are real commands, and it gives away no answer.

The guide walks an instructor through a term with pasted commands; each `python -m lmpolicy_grader ...` line
must parse with the grader's own command line (a renamed flag would otherwise leave the guide wrong). And the
guide is read by anyone: no line of a solution, a mark scheme or a hidden test of source/ch11 may appear in it.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import nbformat
import pytest

from lmpolicy_grader.__main__ import Examples, Grade, Release, Report, parse

REPO = Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "instructors.md"
COMMAND = re.compile(r"python -m lmpolicy_grader\b([^`#\n]*)")
OPTIONAL = re.compile(r"\[([^\]]*)\]")  # "[--workers 4]" in a synopsis: the option, given
# the regions of a source cell that nbgrader keeps from students
HIDDEN = [re.compile(r"### BEGIN SOLUTION(.*?)### END SOLUTION", re.DOTALL),
          re.compile(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", re.DOTALL)]
TRIVIAL = 25  # shorter lines ("return x", "pass") can occur in any text


def guide_commands() -> list[str]:
    """Every grader command line in the guide's code blocks, options in [...] included, help requests left out."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    found = []
    for block in blocks:
        for match in COMMAND.finditer(block):
            arguments = OPTIONAL.sub(r"\1", match.group(1)).strip()
            if "--help" not in arguments:
                found.append(arguments)
    return found


def test_the_guide_shows_the_commands_of_a_term():
    commands = guide_commands()
    kinds = {type(parse(shlex.split(c)).command) for c in commands}
    assert {Release, Examples, Grade, Report} <= kinds, commands


@pytest.mark.parametrize("arguments", guide_commands())
def test_every_grader_command_in_the_guide_parses(arguments):
    try:
        parse(shlex.split(arguments))
    except SystemExit as refused:  # tyro prints why and exits
        pytest.fail(f"`python -m lmpolicy_grader {arguments}` in docs/instructors.md is refused ({refused.code})")


def _telling(text: str) -> list[str]:
    """The lines of ``text`` that could tell something: long enough, and not the import of a notebook's hidden
    tests, which every test cell's hidden part holds and the guide shows as the form of one."""
    return [line.strip() for line in text.splitlines()
            if len(line.strip()) >= TRIVIAL and not line.strip().startswith("from lmpolicy_grader.hidden_tests import")]


def test_the_guide_quotes_no_solution_mark_scheme_or_hidden_test():
    guide = GUIDE.read_text()
    leaked, checked = [], 0
    for path in sorted((REPO / "source" / "ch11").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for region in HIDDEN:
                for text in region.findall(cell.source):
                    lines = _telling(text)
                    checked += len(lines)
                    leaked += [f"{path.name}: {line}" for line in lines if line in guide]
    for path in sorted((REPO / "lib" / "lmpolicy_grader" / "hidden_tests").glob("nb*.py")):  # the hidden tests' code
        lines = [line for line in _telling(path.read_text())  # a line as short as `check_shape(out, shape, what)`
                 if len(line) >= 2 * TRIVIAL and not line.startswith(("from ", "import ", '"""', "#"))]  # is any test's
        checked += len(lines)
        leaked += [f"{path.name}: {line}" for line in lines if line in guide]
    assert checked > 100  # the solutions, mark schemes and hidden tests were found
    assert leaked == []
