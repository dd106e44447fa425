"""Verdict lines wrapped between words, colours kept, at a width nbgrader validate does not wrap again."""
from lmpolicy.notebook.checks import BOLD, RED, RESET
from lmpolicy.notebook.verdict_lines import CONTINUATION, WIDTH, strip_ansi, wrap
from tests.verdicts import one_line

HEADING = f"{RED}{BOLD}\u2717 Not defined yet:{RESET}"
ADVICE = ("softmax is defined in Exercise 01.softmax's answer cell, which has not run in this kernel: run it first. "
          "After a restart (or to be sure), Run \u25b8 Run All Above runs every cell above this one.")


def test_a_coloured_verdict_is_cut_between_words_and_keeps_its_coloured_start():
    lines = wrap(f"{HEADING} {ADVICE}").split("\n")
    assert len(lines) == 3 and lines[0].startswith(HEADING + " softmax is defined")
    plain = [strip_ansi(line) for line in lines]
    # the colour codes take no room: each line holds WIDTH visible characters at most, the first one too
    assert all(len(line) <= WIDTH for line in plain) and len(plain[0]) > WIDTH - 15, plain
    assert all(line.startswith(CONTINUATION) and not line.startswith(CONTINUATION + " ") for line in plain[1:])
    assert one_line(plain) == "\u2717 Not defined yet: " + ADVICE


def test_what_is_wrapped_already_is_not_wrapped_again_by_validate_on_the_command_line():
    once = wrap(f"{HEADING} {ADVICE}\nHint: a short hint")
    assert wrap(once) == once
    # nbgrader validate prints each verdict line indented by 4 within its 90 columns
    assert wrap(strip_ansi(once), 90, "    ") == "\n".join("    " + line for line in strip_ansi(once).split("\n"))


def test_a_word_longer_than_a_line_keeps_a_line_of_its_own_unbroken():
    path = "/".join(["folder"] * 20)
    lines = wrap(f"cannot read {path} here").split("\n")
    assert lines == ["cannot read", CONTINUATION + path, CONTINUATION + "here"]


def test_every_escape_sequence_is_stripped_as_nbconvert_strips_it():
    from nbconvert.filters import strip_ansi as nbconvert_strip_ansi

    shown = "\x1b[2K\x1b[38;5;28m\u2717 Check failed:\x1b[0m the sum \x1b[1;31mis off\x1b[39m by 1\x1b[K"
    assert strip_ansi(shown) == nbconvert_strip_ansi(shown) == "\u2717 Check failed: the sum is off by 1"
