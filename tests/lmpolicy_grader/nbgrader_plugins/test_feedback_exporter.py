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
