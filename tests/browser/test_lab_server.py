"""`make lab` serves a student's JupyterLab: nbgrader's Validate, none of the instructor's tools, and no
Assignment List without an exchange; `make instructor` serves the instructor's, with the formgrader."""
import re

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]

INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:menu")


def page_config(body: str) -> str:
    return re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', body, re.S).group(1)


def test_student_lab_loads_validate_but_not_the_instructors_tools(lab_server):
    status, _, body = lab_server.get("/lab")
    assert status == 200, f"/lab answered {status}"
    config = page_config(body)
    # the page config lists the prebuilt (federated) lab extensions the browser will load
    for extension in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        assert f'"name": "{extension}"' in config, f"/lab does not load the {extension} lab extension"
    disabled = re.search(r'"disabledExtensions": \[(.*?)\]', config, re.S).group(1)
    for plugin in INSTRUCTOR_PLUGINS:
        assert f'"{plugin}"' in disabled, f"{plugin} is not disabled in the student's lab"
    assert '"@jupyter/nbgrader:validate-assignment"' not in disabled
    for path in ("/formgrader", "/assignments?course_id=lm-policy", "/formgraders"):
        assert lab_server.get(path)[0] == 404, f"the student's lab answers {path}"


def test_student_lab_made_the_working_copy_from_the_release(student_copy, repo_root):
    release = sorted(p.name for p in (repo_root / "release" / "ch11").glob("*.ipynb"))
    assert sorted(p.name for p in student_copy.glob("*.ipynb")) == release
    # test_feedback_loop.py works in 01 of this same copy; the others are as the release made them
    for name in release[1:]:
        assert (student_copy / name).read_bytes() == (repo_root / "release" / "ch11" / name).read_bytes(), name


def test_instructor_lab_has_the_formgrader(instructor_lab_server):
    status, final_url, body = instructor_lab_server.get("/formgrader")
    assert status == 200, f"/formgrader answered {status}:\n{instructor_lab_server.log()[-2000:]}"
    assert "/formgrader/" in final_url, f"/formgrader ended at {final_url}"
    title = re.search(r"<title>(.*?)</title>", body, re.S)
    assert title and "nbgrader" in title.group(1), f"/formgrader is not nbgrader's page: {title}"
    status, _, lab = instructor_lab_server.get("/lab")
    assert status == 200 and "@jupyter/nbgrader:formgrader" not in re.search(
        r'"disabledExtensions": \[(.*?)\]', page_config(lab), re.S).group(1)


def test_make_work_copy_copies_once_and_never_overwrites_the_students_notebooks(repo_root, tmp_path):
    import shutil
    import subprocess

    copy = "test-artifacts/work-copy-test/ch11"
    shutil.rmtree(repo_root / copy, ignore_errors=True)
    make = ["make", "--no-print-directory", "-o", ".venv/.installed", "work-copy", f"CH11_COPY={copy}"]
    subprocess.run(make, cwd=repo_root, check=True)
    mine = repo_root / copy / "01_policy_softmax.ipynb"
    mine.write_text("my answers")
    (repo_root / copy / "02_temperature.ipynb").unlink()  # as if the release added a notebook later
    subprocess.run(make, cwd=repo_root, check=True)
    assert mine.read_text() == "my answers"
    assert (repo_root / copy / "02_temperature.ipynb").read_bytes() == \
        (repo_root / "release" / "ch11" / "02_temperature.ipynb").read_bytes()
    shutil.rmtree(repo_root / copy.rsplit("/", 1)[0])
