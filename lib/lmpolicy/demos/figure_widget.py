"""A matplotlib figure shown in JupyterLab as an ipywidgets.Image, redrawn in place.

The demos never rebuild their figures: a control's callback changes the existing artists
(``set_data``, ``set_text``, ``set_offsets`` ...) and calls ``redraw()``, which renders the figure with
the Agg backend and swaps the PNG bytes of the Image widget. The browser replaces the picture in
one step, so there is no flicker, and no lab extension (such as ipympl) is needed.

The figure is a bare ``matplotlib.figure.Figure`` (not pyplot), so a notebook's inline backend
never shows a second, static copy of it.
"""
from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

class FigureImage:
    """A figure plus the Image widget that shows it.

    ``figure`` is ready for ``add_subplot`` / ``subplot_mosaic``; ``widget`` (built on first use,
    so nothing opens a comm until the demo is shown) displays the latest ``redraw()``.
    """

    def __init__(self, width: float, height: float, dpi: int = 80) -> None:
        self.figure = Figure(figsize=(width, height), dpi=dpi)
        self.canvas = FigureCanvasAgg(self.figure)
        self._widget = None

    def png(self) -> bytes:
        """The figure rendered as PNG bytes (fast zlib level: these images are never stored)."""
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=self.figure.dpi,
                            pil_kwargs={"compress_level": 1})
        return buffer.getvalue()

    @property
    def widget(self):
        if self._widget is None:
            import ipywidgets

            width, height = self.figure.get_size_inches() * self.figure.dpi
            self._widget = ipywidgets.Image(value=self.png(), format="png",
                                            layout=ipywidgets.Layout(width=f"{width:.0f}px",
                                                                     height=f"{height:.0f}px"))
        return self._widget

    def redraw(self) -> None:
        """Show the figure's current state (a no-op until the widget exists)."""
        if self._widget is not None:
            self._widget.value = self.png()
