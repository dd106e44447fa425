"""A matplotlib figure shown in JupyterLab as an ipywidgets.Image, redrawn in place.

The demos never rebuild their figures: a control's callback changes the existing artists
(``set_data``, ``set_height``, ``set_offsets`` ...) and calls ``redraw()``, which renders the figure with
the Agg backend and swaps the PNG bytes of the Image widget. The browser replaces the picture in
one step, so there is no flicker, and no lab extension (such as ipympl) is needed.

Blitting keeps a slider move cheap: the artists that move with every update (bars, dots) are
registered with ``set_moving``; they are left out of the full render, which is cached, and an
ordinary ``redraw()`` only pastes the cached background and draws them on top. Anything else that
changes (axis limits, tick labels, curves) needs ``redraw(full=True)``.

The figure is a bare ``matplotlib.figure.Figure`` (not pyplot), so a notebook's inline backend
never shows a second, static copy of it. It is shown pixel for pixel, at ``DPI`` (96, the CSS
pixel: a 10-point label is 13 px high), so a figure of width ``w`` inches takes ``96 w`` pixels of
the notebook. The demos keep theirs within ``MAX_WIDTH_PX``, which fits the output area of a laptop:
848 px in a 1280 px wide JupyterLab with the file browser open (its default layout). In a narrower
output area the picture shrinks to fit (keeping its proportions) instead of being cut off.

Every picture has a text alternative that says what it shows (``describe``). ipywidgets has no ``alt`` for an
Image (and its tooltip breaks the view of a widget without a description), so the words go into
``text_widget``, an HTML widget out of sight beside the picture, as ``<p data-describes="<the picture's class>">``;
the demo's front-end script (``lmpolicy.demos.accessible``) sets them as the picture's ``alt``. A demo describes
its picture again whenever it redraws it, so the words follow the plot.
"""
from __future__ import annotations

import io

import html

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

DPI = 96
MAX_WIDTH_PX = 832  # 848 px output area, less the room a vertical scroll bar may take


class FigureImage:
    """A figure plus the Image widget that shows it.

    ``figure`` is ready for ``add_subplot`` / ``add_axes``; ``widget`` (built on first use, so nothing
    opens a comm until the demo is shown) displays the latest ``redraw()``.
    """

    def __init__(self, width: float, height: float, dpi: int = DPI, name: str = "lmpolicy-picture") -> None:
        if width * dpi > MAX_WIDTH_PX:
            raise ValueError(f"a demo figure must fit {MAX_WIDTH_PX} px, got {width} in at {dpi} dpi "
                             f"= {width * dpi:.0f} px")
        self.figure = Figure(figsize=(width, height), dpi=dpi)
        self.canvas = FigureCanvasAgg(self.figure)
        self._moving = []
        self._background = None
        self._widget = None
        self._text_widget = None
        self.name = name  # the picture's CSS class: its text alternative names it
        self.description = ""

    def set_moving(self, artists) -> None:
        """The artists redrawn on every update (replacing any earlier list); forces a full render."""
        for artist in self._moving:
            artist.set_animated(False)
        self._moving = list(artists)
        for artist in self._moving:
            artist.set_animated(True)
        self._background = None

    def png(self) -> bytes:
        """The figure as PNG bytes: cached background (rendered if missing) plus the moving artists."""
        if self._background is None:
            self.canvas.draw()  # everything but the moving artists
            self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        else:
            self.canvas.restore_region(self._background)
        for artist in self._moving:
            self.figure.draw_artist(artist)
        width, height = self.canvas.get_width_height()
        picture = Image.frombuffer("RGBA", (width, height), self.canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        buffer = io.BytesIO()
        picture.convert("RGB").save(buffer, format="png", compress_level=1)  # fast: never stored
        return buffer.getvalue()

    @property
    def widget(self):
        if self._widget is None:
            import ipywidgets

            width, _ = self.canvas.get_width_height()
            # pixel for pixel where there is room; ipywidgets' own style (max-width: 100%) shrinks it
            # where there is not, and height "auto" keeps its proportions then
            self._widget = ipywidgets.Image(value=self.png(), format="png",
                                            layout=ipywidgets.Layout(width=f"{width}px", height="auto"))
            self._widget.add_class(self.name)
        return self._widget

    @property
    def text_widget(self):
        """The picture's text alternative as an HTML widget out of sight (no height), to place beside ``widget``."""
        if self._text_widget is None:
            from lmpolicy.demos.base import hidden_html

            self._text_widget = hidden_html(self._described())
        return self._text_widget

    def _described(self) -> str:
        return f"<p data-describes='{html.escape(self.name, quote=True)}'>{html.escape(self.description)}</p>"

    def describe(self, text: str) -> None:
        """The picture's text alternative: what it shows now, in words (kept in step with ``redraw``)."""
        self.description = text
        if self._text_widget is not None and self._text_widget.value != self._described():
            self._text_widget.value = self._described()

    def redraw(self, full: bool = False) -> None:
        """Show the figure's current state; ``full=True`` after changes beyond the moving artists."""
        if full:
            self._background = None
        if self._widget is not None:
            self._widget.value = self.png()
