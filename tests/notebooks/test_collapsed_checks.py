"""The released notebooks open with their check cells collapsed (nbgrader_config.py: CollapseCheckCells)."""
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader import utils

from .notebook_tools import RELEASE_DIR, ROOT, SOURCE_DIR, grade_id, is_autograded_test

NOTEBOOK = "01_policy_softmax"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (SOURCE_DIR / f"{NOTEBOOK}.ipynb").exists(),
                                                   reason="no source notebook 01")]


def collapsed(cell) -> bool:
    return bool(cell.metadata.get("jupyter", {}).get("source_hidden"))


def generate(tmp_path) -> nbformat.NotebookNode:
    """`nbgrader generate_assignment` with the course's config, of notebook 01 alone, in a course of its own."""
    course = tmp_path / "course"
    (course / "source" / "ch11").mkdir(parents=True)
    shutil.copy(SOURCE_DIR / f"{NOTEBOOK}.ipynb", course / "source" / "ch11")
    nbgrader = Path(sys.executable).with_name("nbgrader")
    subprocess.run([str(nbgrader), "generate_assignment", "ch11", "--force", "--log-level=ERROR",
                    f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{tmp_path / 'gb.db'}"],
                   cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    return nbformat.read(course / "release" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)


def test_generate_assignment_collapses_the_check_cells_and_nothing_else(tmp_path):
    released = generate(tmp_path)
    checks = [cell for cell in released.cells if is_autograded_test(cell)]
    assert [grade_id(cell) for cell in checks] == ["nb01_softmax__tests", "ex11_1a__tests"]
    assert all(collapsed(cell) for cell in checks)
    assert not [grade_id(cell) or index for index, cell in enumerate(released.cells)
                if collapsed(cell) and not is_autograded_test(cell)]
    # the metadata is outside nbgrader's checksums: a released check cell is not "changed"
    for cell in checks:
        assert cell.metadata.nbgrader.checksum == utils.compute_checksum(cell)


def test_the_committed_release_has_its_check_cells_collapsed():
    """Fails until release/ch11 is regenerated (`make release`) with the course's config."""
    for path in sorted(RELEASE_DIR.glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        open_checks = [grade_id(cell) for cell in cells if is_autograded_test(cell) and not collapsed(cell)]
        assert not open_checks, f"{path.name}: check cells shown in full: {open_checks} (run `make release`)"
