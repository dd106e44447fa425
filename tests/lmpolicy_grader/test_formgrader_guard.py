"""formgrader_guard's routes: formgrader's own under /formgrader/submissions/, in its order, two of them guarded, and
ahead of formgrader's (the pages themselves, in Chromium: tests/browser/test_hostile_markup.py)."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from nbgrader.server_extensions.formgrader import handlers as formgrader

from lmpolicy_grader import formgrader_guard
from lmpolicy_grader.formgrader_guard import (GuardedSubmissionHandler, SubmissionImagesHandler, guarded_routes)


def test_the_guarded_routes_are_formgraders_in_its_order_with_the_page_and_the_files_replaced():
    routes = guarded_routes("/user/x/")
    theirs = [route for route in formgrader.default_handlers if route[0].startswith("/formgrader/submissions/")]
    assert [pattern for pattern, *_ in routes] == ["/user/x/" + pattern.lstrip("/") for pattern, *_ in theirs]
    handlers = [route[1] for route in routes]
    assert GuardedSubmissionHandler in handlers and SubmissionImagesHandler in handlers
    assert formgrader.SubmissionHandler not in handlers and formgrader.SubmissionFilesHandler not in handlers
    # the navigation (next, prev) still matches before the files' catch-all
    first = next(handler for pattern, handler, *_ in routes if re.fullmatch(pattern, "/user/x/formgrader/submissions/abc/next"))
    assert first is formgrader.SubmissionNavigationHandler


def test_it_loads_before_formgrader_or_refuses_to_load():
    assert sorted(["nbgrader.server_extensions.formgrader", "lmpolicy_grader.formgrader_guard"])[0] == \
        "lmpolicy_grader.formgrader_guard"  # Jupyter loads extensions in the order of their names
    added = []
    web_app = SimpleNamespace(settings={"base_url": "/"}, add_handlers=lambda host, routes: added.append(routes))
    formgrader_guard._load_jupyter_server_extension(SimpleNamespace(web_app=web_app, log=SimpleNamespace(info=print)))
    assert added and added[0] == guarded_routes("/")
    web_app.settings["nbgrader_formgrader"] = object()  # formgrader came first: its routes would answer first
    with pytest.raises(RuntimeError, match="must load before nbgrader's formgrader"):
        formgrader_guard._load_jupyter_server_extension(SimpleNamespace(web_app=web_app, log=None))


def test_a_submissions_file_is_served_only_if_it_is_a_raster_image(tmp_path):
    from tornado import web
    for name in ("plot.png", "photo.JPG", "a.jpeg", "b.gif", "c.webp"):
        (tmp_path / name).write_bytes(b"x")
        assert SubmissionImagesHandler.validate_absolute_path(_bare_handler(), str(tmp_path), str(tmp_path / name))
    for name in ("notes.html", "drawing.svg", "01_x.ipynb", "page.htm", "x.png.html", "script.js"):
        (tmp_path / name).write_bytes(b"x")
        with pytest.raises(web.HTTPError) as refused:
            SubmissionImagesHandler.validate_absolute_path(_bare_handler(), str(tmp_path), str(tmp_path / name))
        assert refused.value.status_code == 404


def _bare_handler():
    """Enough of a handler for StaticFileHandler.validate_absolute_path."""
    handler = object.__new__(SubmissionImagesHandler)
    handler.request = SimpleNamespace(path="/formgrader/submissions/x/y")
    handler.default_filename = None
    handler.path = "y"
    return handler
