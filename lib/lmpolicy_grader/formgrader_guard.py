"""Formgrader's pages of a submission, guarded: a Jupyter server extension of the instructor's server.

Formgrader (nbgrader 0.9.6) shows a submission on its grading page, /formgrader/submissions/<id>/, rendered with
nbconvert, and serves the files of the submission's folder under it (/formgrader/submissions/<id>/<path>) on the
instructor's own origin. A script in either runs with the instructor's session, which can change any grade
through formgrader's API. This extension answers those two routes instead of formgrader:

- the grading page: the course's sanitizer runs on it whatever the configuration says
  (``sanitize_markup.ensure_sanitized``, after every other preprocessor), and the response carries the page's
  Content-Security-Policy (``content_policy.policy``) with a nonce new for each request, which the page's own two
  inline scripts carry (templates/formgrade/formgrade_macros.html.j2); Jupyter's own policy stays, as a second
  policy of the same header (both are enforced);
- a submission's files: only raster images (what a written answer may show: ``![plot](plot.png)``), each with
  a policy that runs nothing (``default-src 'none'; sandbox``); any other file, an HTML or SVG page a student
  handed in beside the notebook and linked to, is not served (404).

It also adds formgrader a page, the rubric page of a notebook (/formgrader/rubric/<assignment>/<notebook>/,
``lmpolicy_grader.rubric``): the class's written answers, identical ones grouped, each with its cell's rubric, sent
with the same policy and a nonce per request; it writes grades only through formgrader's own API.

Every other route of formgrader (the navigation between submissions, its static files, its API) is formgrader's.
Tornado tries the routes in the order extensions added them, and Jupyter loads extensions in the order of their
names: this one ("lmpolicy_grader...") before formgrader ("nbgrader..."), so that its routes come first. If formgrader
was loaded first, loading this one fails with that reason rather than guard nothing.

Enabled by jupyter-config/instructor/jupyter_server_config.json (`make instructor`) and, on a hub, the instructor's
role configuration (deploy/singleuser/instructor/).
"""
from __future__ import annotations

from pathlib import PurePath

from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.formgrader import handlers as formgrader
from nbgrader.server_extensions.formgrader.base import check_notebook_dir, check_xsrf
from tornado import web

from lmpolicy_grader.content_policy import new_nonce, policy
from lmpolicy_grader.nbgrader_plugins.sanitize_markup import RASTER_IMAGE_TYPES, ensure_sanitized

IMAGE_SUFFIXES = frozenset({f".{kind}" for kind in RASTER_IMAGE_TYPES} | {".jpg"})
INERT_FILE_POLICY = "default-src 'none'; sandbox"


class _PageExporter:
    """Formgrader's exporter, made to sanitize, rendering with the nonce of the response's policy."""

    def __init__(self, exporter, nonce: str):
        self._exporter, self._nonce = exporter, nonce

    def from_filename(self, filename, resources=None, **kw):
        ensure_sanitized(self._exporter)
        return self._exporter.from_filename(filename, resources={**(resources or {}), "csp_nonce": self._nonce}, **kw)


class _PagePolicy:
    """A page's Content-Security-Policy with a nonce of its own, beside Jupyter's policy."""

    @property
    def csp_nonce(self) -> str:
        # made on first use: Tornado sets the default headers (the policy among them) when the handler is made
        if not hasattr(self, "_csp_nonce"):
            self._csp_nonce = new_nonce()
        return self._csp_nonce

    @property
    def content_security_policy(self) -> str:
        return ", ".join([super().content_security_policy, policy(self.csp_nonce)])


class GuardedSubmissionHandler(_PagePolicy, formgrader.SubmissionHandler):
    """Formgrader's grading page of a submission, sanitized, with the page's Content-Security-Policy."""

    @property
    def exporter(self):
        return _PageExporter(super().exporter, self.csp_nonce)


class SubmissionImagesHandler(formgrader.SubmissionFilesHandler):
    """A submission's files as its grading page may show them: raster images only, inert."""

    @property
    def content_security_policy(self) -> str:
        return ", ".join([super().content_security_policy, INERT_FILE_POLICY])

    def validate_absolute_path(self, root: str, absolute_path: str) -> str | None:
        if PurePath(absolute_path).suffix.lower() not in IMAGE_SUFFIXES:
            raise web.HTTPError(404, "formgrader serves a submission's images only")
        return super().validate_absolute_path(root, absolute_path)


class RubricHandler(_PagePolicy, formgrader.BaseHandler):
    """The rubric page of a notebook of an assignment (``lmpolicy_grader.rubric.page``)."""

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    def get(self, assignment_id: str, notebook_id: str):
        from lmpolicy_grader.rubric.page import render

        self.write(render(self.gradebook, self.coursedir, assignment_id, notebook_id, self.base_url, self.csp_nonce))


RUBRIC_ROUTE = r"formgrader/rubric/([^/]+)/([^/]+)/?"

GUARDED = {formgrader.SubmissionHandler: GuardedSubmissionHandler,
           formgrader.SubmissionFilesHandler: SubmissionImagesHandler}


def guarded_routes(base_url: str) -> list[tuple]:
    """Formgrader's routes under /formgrader/submissions/, in its order, the two above replaced: the same patterns, so
    that its navigation and static routes there keep matching before the files' catch-all."""
    routes = []
    for pattern, handler, *arguments in formgrader.default_handlers:
        if pattern.startswith("/formgrader/submissions/"):
            routes.append((url_path_join(base_url, pattern.lstrip("/")), GUARDED.get(handler, handler), *arguments))
    return routes


def _jupyter_server_extension_points():
    return [{"module": "lmpolicy_grader.formgrader_guard"}]


def _load_jupyter_server_extension(serverapp) -> None:
    web_app = serverapp.web_app
    if "nbgrader_formgrader" in web_app.settings:
        raise RuntimeError("lmpolicy_grader.formgrader_guard must load before nbgrader's formgrader, whose routes "
                           "would otherwise answer first: keep both extensions' names as they are")
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", guarded_routes(base_url))
    web_app.add_handlers(".*$", [(url_path_join(base_url, RUBRIC_ROUTE), RubricHandler)])
    serverapp.log.info("formgrader's pages of a submission are guarded (lmpolicy_grader.formgrader_guard)")
