"""lmpolicy.notebook.figure: a figure reaches the notebook as an <img> whose alt is its description, in every view."""
import base64
import io
from html.parser import HTMLParser

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from lmpolicy.notebook.figure import described, show

DESCRIPTION = 'Two "runs" < 1: run A ends at 0.788 & run B at 0.715.'


class Images(HTMLParser):
    """The <img> elements of an HTML fragment, their attributes decoded, and the tags around them."""

    def __init__(self, html: str):
        super().__init__()
        self.images, self.tags = [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))


def a_figure():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0.5, 0.788], marker="o")
    return fig


def test_the_figure_is_an_image_whose_alt_is_its_description():
    bundle = described(a_figure(), DESCRIPTION)
    page = Images(bundle["text/html"])
    (image,) = page.images
    assert page.tags == ["figure", "img"]
    assert image["alt"] == DESCRIPTION  # quotes, < and & escaped in the HTML, the same words once parsed
    assert bundle["text/plain"] == DESCRIPTION
    kind, data = image["src"].split(",", 1)
    assert kind == "data:image/png;base64"
    picture = Image.open(io.BytesIO(base64.b64decode(data)))
    assert picture.size == (int(image["width"]), int(image["height"]))
    # drawn on white, opaque: legible on JupyterLab's dark theme as on the light one
    assert picture.convert("RGBA").getpixel((0, 0)) == (255, 255, 255, 255)
    plt.close("all")


def test_a_figure_without_words_is_refused():
    with pytest.raises(ValueError, match="needs a description"):
        described(a_figure(), "  ")
    plt.close("all")


def test_the_alt_survives_the_feedback_pages_sanitizer():
    from lmpolicy_grader.nbgrader_plugins.sanitize_markup import clean_html

    bundle = described(a_figure(), DESCRIPTION)
    (before,), (after,) = Images(bundle["text/html"]).images, Images(clean_html(bundle["text/html"])).images
    assert after["alt"] == DESCRIPTION and after["src"] == before["src"]
    plt.close("all")


def displayed(monkeypatch) -> list:
    """What ``IPython.display.display`` is handed from now on (no IPython shell made: a global one would make
    other tests on this worker believe they run in a kernel)."""
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objects, **options: shown.append((objects, options)))
    return shown


def test_show_displays_the_described_figure_once_and_closes_it(monkeypatch):
    shown = displayed(monkeypatch)
    fig = a_figure()
    show(fig, DESCRIPTION)
    (((bundle,), options),) = shown
    assert options == {"raw": True}
    assert Images(bundle["text/html"]).images[0]["alt"] == DESCRIPTION
    assert not plt.fignum_exists(fig.number)  # the inline backend will not show it again, undescribed
