"""lmpolicy.notebook.start_page: at its top the start page says who the student is and whose numbers they get, and
shows their progress as of the moment it is opened, in the checks' own words."""
import shutil

import nbformat
import pytest

from lmpolicy.notebook import progress, start_page
from tests.lmpolicy.notebook.test_progress import (grade_cells, progress_path, release_cells,  # noqa: F401
                                                   working_copy, write_answer)


def grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def test_the_start_page_says_who_the_student_is_and_whose_numbers_they_get(monkeypatch):
    monkeypatch.delenv("LMPOLICY_VARIANTS", raising=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("LMPOLICY_STUDENT_ID", "alice")
    assert start_page.identity().startswith("You are alice (student id set by `make lab STUDENT=...`)")
    assert "your own numbers" in start_page.identity()
    monkeypatch.delenv("LMPOLICY_STUDENT_ID")
    monkeypatch.setenv("JUPYTERHUB_USER", "bob")
    assert start_page.identity().startswith("You are bob (student id your hub user name)")
    monkeypatch.delenv("JUPYTERHUB_USER")
    assert start_page.identity().startswith("No student id is set, so the numeric exercises show the chapter's numbers")
    assert "make lab STUDENT=<your id>" in start_page.identity()
    monkeypatch.setenv("LMPOLICY_STUDENT_ID", "alice")
    monkeypatch.setenv("LMPOLICY_VARIANTS", "off")
    assert "everyone the chapter's numbers" in start_page.identity()


def test_the_overview_has_one_row_per_notebook_with_what_is_next_in_the_tables_words(progress_path, working_copy):
    write_answer(working_copy, "01_policy_softmax", "ex11_1b__manual", "By the chain rule, ...")
    progress.record_failure("nb01_softmax", "Check failed: returned NaN", check=progress.fingerprint(next(
        c.source for c in release_cells("01_policy_softmax") if grade_id(c) == "nb01_softmax__tests")))
    shown = start_page.overview()
    assert [row[0] for row in shown.rows] == list(progress.chapter().notebooks)
    first = shown.rows[0]
    # the written answer is in (not done), and what is next reads in the check's own words
    assert first[1] == f"0 of {len(grade_cells('01_policy_softmax'))}, 1 written"
    assert first[3] == "Exercise 01.softmax visible check: Check failed: returned NaN"
    # the words are the detailed table's: the same status for the same item
    assert any(row[0] == "Exercise 01.softmax" and row[4] == "Check failed: returned NaN" for row in progress.table())
    everything = sum(len(grade_cells(name)) for name in progress.chapter().notebooks)
    assert shown.total[1] == f"0 of {everything}, 1 written"
    page = shown._repr_html_()
    # a table a screen reader can read: a caption, column and row headers; the id on top
    assert page.index("lmpolicy-who") < page.index("<table") and "<caption" in page
    assert page.count('scope="col"') == 4 and page.count('scope="row"') == len(shown.rows) + 1
    assert len(str(shown).splitlines()) <= 2 + 1 + len(shown.rows) + 1  # one screen: a dozen lines


def test_the_server_serves_the_start_page_with_the_overview_as_of_now_and_leaves_the_file(
        progress_path, working_copy, tmp_path):
    """Opened after a check passed, the start page shows it, though the file on disk holds the page as committed."""
    import asyncio

    from lmpolicy.notebook.served_notebooks import StudentContentsManager

    start = working_copy.parent / "00_start_here.ipynb"
    shutil.copy(progress.course_root() / "notebooks" / "00_start_here.ipynb", start)
    before = start.read_bytes()
    manager = StudentContentsManager(root_dir=str(working_copy.parent))

    def served(path):
        return asyncio.run(manager.get(path, content=True, type="notebook"))["content"]

    progress.record("nb01_softmax")
    page = served("00_start_here.ipynb")
    filled = [c for c in page.cells if c.cell_type == "code" and c.outputs]
    assert len(filled) == 1 and start_page.OVERVIEW_TAG in filled[0].metadata["tags"]
    assert filled[0] is page.cells[1]  # right under the title: seen when the page opens
    html = filled[0].outputs[0]["data"]["text/html"]
    assert "lmpolicy-who" in html and "course total" in html and "1 of " in html
    progress.record_failure("nb01_softmax", "Check failed: returned NaN", check=progress.UNKNOWN_CHECK)
    assert "Check failed: returned NaN" in served("00_start_here.ipynb").cells[1].outputs[0]["data"]["text/html"]
    assert start.read_bytes() == before  # the file as the student has it: JupyterLab sees no change under it
    other = served("ch11/01_policy_softmax.ipynb")  # any other notebook: as saved
    assert all(not c.get("outputs") for c in other.cells if c.cell_type == "code")


def test_every_notebook_is_served_with_the_language_its_kernel_reports(working_copy):
    """JupyterLab marks a notebook unsaved when the kernel's language_info differs from the notebook's: served with
    the kernel's own, a notebook opened and left alone stays clean; the file keeps the committed metadata."""
    import asyncio

    from tests.lmpolicy.notebook.test_checks import start_ipc_kernel

    from lmpolicy.notebook.served_notebooks import StudentContentsManager

    path = working_copy / "01_policy_softmax.ipynb"
    saved = nbformat.read(path, as_version=4).metadata["language_info"]
    assert saved == {"name": "python"}  # as committed: the language's name alone
    manager = StudentContentsManager(root_dir=str(working_copy))
    served = asyncio.run(manager.get("01_policy_softmax.ipynb", content=True, type="notebook"))["content"]
    kernel, client = start_ipc_kernel()
    try:
        reported = client.kernel_info(reply=True, timeout=60)["content"]["language_info"]
    finally:
        client.stop_channels()
        kernel.shutdown_kernel(now=True)
    assert served.metadata["language_info"] == reported
    assert nbformat.read(path, as_version=4).metadata["language_info"] == saved
