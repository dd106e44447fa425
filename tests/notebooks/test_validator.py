"""nbgrader's Validator: every source notebook passes; every release notebook fails exactly its autograded cells."""
import re

import pytest
from nbgrader.validator import Validator

from .notebook_tools import (CHECK_ERRORS, NOTEBOOK_NAMES, RELEASE_DIR, SOURCE_DIR, grade_id,
                             is_autograded_test, is_manual_answer, read)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# how lmpolicy.checks renders a failed check (its _render_traceback_): "✗ Check failed: ..."
FRIENDLY = re.compile(r"^\u2717 (Check failed|Your code raised an error|Not allowed): ", re.MULTILINE)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not NOTEBOOK_NAMES, reason="no source notebooks yet")]


def validate(path, monkeypatch, tmp_path):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "progress.json"))
    return Validator().validate(str(path))


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_source_notebook_passes_validation(name, monkeypatch, tmp_path):
    results = validate(SOURCE_DIR / f"{name}.ipynb", monkeypatch, tmp_path)
    assert results == {}, f"{name}: {[r.get('raw_error', r)[:500] for r in results.get('failed', [])]}"
    assert not (tmp_path / "progress.json").exists()


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_release_notebook_fails_on_every_graded_part_and_nothing_else(name, monkeypatch, tmp_path):
    """The stubs fail every autograded test cell with a friendly check; the manual cells are unanswered."""
    release = RELEASE_DIR / f"{name}.ipynb"
    results = validate(release, monkeypatch, tmp_path)
    assert set(results) == {"failed"}, f"{name}: unexpected validator result {sorted(results)}"
    cells = read(release).cells
    expected = sorted(cell.source.strip() for cell in cells if is_autograded_test(cell) or is_manual_answer(cell))
    assert sorted(failure["source"] for failure in results["failed"]) == expected, (
        f"{name}: the failing cells are not exactly the graded cells "
        f"{[grade_id(c) for c in cells if is_autograded_test(c) or is_manual_answer(c)]}")
    unanswered = {cell.source.strip() for cell in cells if is_manual_answer(cell)}
    for failure in results["failed"]:
        error = ANSI.sub("", failure["raw_error"])
        if failure["source"] in unanswered:
            assert error == "You did not provide a response.", f"{name}: a manual answer cell fails with {error}"
            continue
        assert re.search(rf"^({'|'.join(CHECK_ERRORS)}): ", error, re.MULTILINE) or FRIENDLY.search(error), \
            f"a release test cell failed with something other than a friendly check: {error[-600:]}"
