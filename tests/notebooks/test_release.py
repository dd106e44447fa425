"""release/ch11 is exactly what `nbgrader generate_assignment` makes from source/ch11 (never hand-edited)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .notebook_tools import NOTEBOOK_NAMES, RELEASE_DIR, ROOT, SOURCE_DIR

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not NOTEBOOK_NAMES, reason="no source notebooks yet")]


def without_checksums(path: Path) -> dict:
    """The notebook as JSON, minus nbgrader's cell checksums (the one thing allowed to vary)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell.get("metadata", {}).get("nbgrader", {}).pop("checksum", None)
    return nb


def test_regenerating_the_release_reproduces_release_ch11(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(SOURCE_DIR, course / "source" / "ch11")
    nbgrader = Path(sys.executable).with_name("nbgrader")
    subprocess.run(
        [str(nbgrader), "generate_assignment", "ch11", "--force", "--log-level=ERROR",
         f"--CourseDirectory.root={course}", f"--CourseDirectory.db_url=sqlite:///{tmp_path / 'gradebook.db'}"],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    fresh_dir = course / "release" / "ch11"
    fresh = sorted(p.name for p in fresh_dir.glob("*.ipynb"))
    committed = sorted(p.name for p in RELEASE_DIR.glob("*.ipynb"))
    assert fresh == committed, "release/ch11 has other notebooks than source/ch11: run `make release`"
    for name in fresh:
        assert (fresh_dir / name).read_text(encoding="utf-8") == (RELEASE_DIR / name).read_text(encoding="utf-8") \
            or without_checksums(fresh_dir / name) == without_checksums(RELEASE_DIR / name), \
            f"release/ch11/{name} differs from a fresh `nbgrader generate_assignment`: run `make release`"
