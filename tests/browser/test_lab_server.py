"""`make lab` serves JupyterLab with nbgrader's lab extension and its formgrader server extension."""
import re

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]


def test_lab_page_answers_with_nbgrader_and_widgets_extensions(lab_server):
    status, _, body = lab_server.get("/lab")
    assert status == 200, f"/lab answered {status}"
    # the page config lists the prebuilt (federated) lab extensions the browser will load
    for extension in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager"):
        assert f'"name": "{extension}"' in body, f"/lab does not load the {extension} lab extension"


def test_formgrader_answers_with_nbgrader_page(lab_server):
    status, final_url, body = lab_server.get("/formgrader")
    assert status == 200, f"/formgrader answered {status}:\n{lab_server.log()[-2000:]}"
    assert "/formgrader/" in final_url, f"/formgrader ended at {final_url}"
    title = re.search(r"<title>(.*?)</title>", body, re.S)
    assert title and "nbgrader" in title.group(1), f"/formgrader is not nbgrader's page: {title}"
