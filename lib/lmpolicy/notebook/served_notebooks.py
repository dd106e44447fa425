"""How the student's Jupyter server serves a notebook: as saved, with two things filled in that only the serving knows.

``StudentContentsManager`` is Jupyter's file contents manager (named by ``ServerApp.contents_manager_class`` in
``jupyter-config/student`` and the hub's student config) but for the model it sends to JupyterLab:

- every Python notebook carries the ``language_info`` its kernel will report. The course commits notebooks with
  only the language's name; JupyterLab writes the kernel's full description into the notebook when the kernel
  connects, which marks a notebook the student has not touched as unsaved (the ● on its tab).
- the start page's overview cell (tagged ``start_page.OVERVIEW_TAG``) holds the student's progress as of the moment
  the page is read (``start_page.with_overview``).

The file on disk is never changed, so JupyterLab's check that a file did not change under it stays quiet.
"""
from __future__ import annotations

from ipykernel.ipkernel import IPythonKernel
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from lmpolicy.notebook.start_page import with_overview

KERNEL_LANGUAGE = "python"


def with_kernel_language(notebook) -> None:
    """Give a Python notebook the language description ipykernel reports (its Python's version included)."""
    language = notebook.metadata.get("language_info") or {}
    if language.get("name", KERNEL_LANGUAGE) == KERNEL_LANGUAGE:
        notebook.metadata["language_info"] = {**language, **IPythonKernel.language_info}


class StudentContentsManager(AsyncLargeFileManager):
    """Serves a notebook as saved, with its kernel's language, and the start page with the student's overview."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model.get("type") == "notebook" and model.get("content") is not None:
            with_kernel_language(model["content"])
            try:
                with_overview(model["content"])
            except Exception:  # noqa: BLE001 - the page as saved is better than no page
                self.log.warning("lmpolicy: the start page's overview could not be computed", exc_info=True)
        return model
