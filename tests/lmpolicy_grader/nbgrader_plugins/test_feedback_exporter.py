"""FeedbackHTMLExporter: nbconvert's HTML page, made without nbconvert's second parse of it."""
from __future__ import annotations

import base64
import copy

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter

from lmpolicy_grader.nbgrader_plugins.feedback_exporter import COMPILED_TEMPLATES, NO_ALT_TEXT, FeedbackHTMLExporter

PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()


def _notebook():
    code = nbformat.v4.new_code_cell("import math\nprint(math.pi)  # a <tag> in code", execution_count=1)
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="3.14159\n"),
                    nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}),
                    nbformat.v4.new_output("error", ename="ValueError", evalue="no", traceback=["\x1b[31mValueError\x1b[0m: no"])]
    markdown = nbformat.v4.new_markdown_cell(f"An image: ![](data:image/png;base64,{PNG}) and $x^2$ <img src='y.png'>")
    nb = nbformat.v4.new_notebook(cells=[markdown, code])
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    return nb


@pytest.mark.parametrize("template", ["lab", "classic"])
def test_the_page_is_nbconverts_page(template):
    nb = _notebook()
    ours, _ = FeedbackHTMLExporter(template_name=template).from_notebook_node(copy.deepcopy(nb))
    theirs, _ = HTMLExporter(template_name=template).from_notebook_node(copy.deepcopy(nb))
    assert str(BeautifulSoup(ours, "html.parser")) == theirs  # the same document, nbconvert's serialization aside
    page = BeautifulSoup(ours, "html.parser")
    images = page.find_all("img")
    assert len(images) >= 3 and all(image.has_attr("alt") for image in images)
    assert sum(image["alt"] == NO_ALT_TEXT for image in images) >= 2  # the png output and the raw <img>
    if template == "lab":
        focusable = page.select("div.jp-Cell-inputWrapper, div.jp-OutputArea-output")
        assert focusable and all(area.get("tabindex") == "0" for area in focusable)


def test_the_templates_are_compiled_once_per_process():
    FeedbackHTMLExporter(template_name="lab").from_notebook_node(_notebook())
    compiled = dict(COMPILED_TEMPLATES._code)
    assert compiled
    FeedbackHTMLExporter(template_name="lab").from_notebook_node(_notebook())
    assert COMPILED_TEMPLATES._code == compiled  # found, not compiled and stored again


def _contrast_on_white(red: int, green: int, blue: int) -> float:
    """WCAG 2.1's contrast ratio of an sRGB colour against white."""
    def channel(value: int) -> float:
        value /= 255
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4
    luminance = 0.2126 * channel(red) + 0.7152 * channel(green) + 0.0722 * channel(blue)
    return 1.05 / (luminance + 0.05)


def test_an_outputs_text_colours_are_darkened_to_aa_on_white_and_keep_their_hue():
    """IPython colours a traceback's comments rgb(95,135,135): 4.1:1 on the feedback's white, under WCAG AA's 4.5."""
    import re

    from lmpolicy_grader.nbgrader_plugins.feedback_exporter import legible_ansi2html

    assert _contrast_on_white(95, 135, 135) < 4.5
    html = legible_ansi2html("\x1b[38;2;95;135;135m# a comment\x1b[0m and \x1b[38;5;16mblack\x1b[0m")
    colours = [tuple(int(c) for c in found) for found in re.findall(r"color: rgb\((\d+),(\d+),(\d+)\)", html)]
    assert len(colours) == 2 and all(_contrast_on_white(*colour) >= 4.5 for colour in colours), html
    red, green, blue = colours[0]
    assert red < green == blue and abs(red / green - 95 / 135) < 0.03  # the same hue, darker
    assert colours[1] == (0, 0, 0) and "# a comment" in html and "black" in html
