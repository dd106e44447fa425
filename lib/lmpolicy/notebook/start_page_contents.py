"""The student's Jupyter server serves the start page with the progress as of the moment it is opened.

``StartPageContentsManager`` is Jupyter's file contents manager (named by ``ServerApp.contents_manager_class`` in
``jupyter-config/student``) but for a notebook with a cell tagged ``start_page.OVERVIEW_TAG``: that cell's output is
the overview computed as the page is read (``start_page.with_overview``). Only the page sent to JupyterLab has it;
the file on disk is not changed, so JupyterLab's check that a file did not change under it stays quiet.
"""
from __future__ import annotations

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from lmpolicy.notebook.start_page import with_overview


class StartPageContentsManager(AsyncLargeFileManager):
    """Serves a notebook as saved, and the start page with the student's current overview in its first output."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if content and model.get("type") == "notebook" and model.get("content") is not None:
            try:
                with_overview(model["content"])
            except Exception:  # noqa: BLE001 - the page as saved is better than no page
                self.log.warning("lmpolicy: the start page's overview could not be computed", exc_info=True)
        return model
