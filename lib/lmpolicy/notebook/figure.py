"""A matplotlib figure shown in a notebook with its text alternative: ``show(fig, description)``.

JupyterLab shows an ``image/png`` output as an ``<img>`` with no ``alt`` (its image renderer reads only a size
from the output's metadata), so a screen reader hears "image" and nothing of the plot. ``show`` displays the
figure instead as HTML, ``<figure><img alt="..."></figure>``, the PNG inline as a ``data:`` URL, with
``description`` as the ``alt``: the words say what the figure shows, numbers included, and the caller computes
them from the data it drew, so they follow the student's own run. The same bundle's ``text/plain`` is the
description, for whatever shows no HTML.

That HTML reaches every view of the notebook with its ``alt``: JupyterLab renders it as it is in a trusted
notebook and keeps ``<img src="data:...">`` and ``alt`` when it sanitizes an untrusted one; nbgrader's feedback
and formgrader pages keep ``figure``, ``img``, ``alt`` and a ``data:image/png`` source through their allowlist
(``lmpolicy_grader.nbgrader_plugins.sanitize_markup``).

The picture is drawn on white, as the inline backend draws it, so it stays legible in JupyterLab's dark theme.
The demos' pictures, which change in place, get their text alternative another way (``lmpolicy.demos.accessible``).
"""
from __future__ import annotations

import base64
import html
import io


def described(fig, description: str) -> dict[str, str]:
    """The output bundle of ``fig`` with ``description`` as its text alternative (``text/html``, ``text/plain``)."""
    if not description.strip():
        raise ValueError("a figure needs a description: what it shows, with the numbers that matter")
    buffer = io.BytesIO()
    # as the inline backend saves a figure: tight box, the figure's dpi, white behind it
    fig.savefig(buffer, format="png", bbox_inches="tight", facecolor="white")
    png = buffer.getvalue()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")  # the IHDR chunk
    image = (f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" '
             f'alt="{html.escape(description, quote=True)}" width="{width}" height="{height}" '
             'style="max-width: 100%; height: auto">')
    return {"text/html": f'<figure style="margin: 0">{image}</figure>', "text/plain": description}


def show(fig, description: str) -> None:
    """Display ``fig`` with ``description`` as its text alternative, and close it (the inline backend would
    otherwise show it a second time, with no text alternative)."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(described(fig, description), raw=True)
    plt.close(fig)
