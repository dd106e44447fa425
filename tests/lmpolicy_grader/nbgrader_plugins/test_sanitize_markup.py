"""The one sanitizer of every view of a submission: each attack form comes out inert, honest markup survives.

"Inert" is checked by construction, not by looking for the attack: the cleaned HTML is parsed and every tag, attribute,
URL and style property in it must be one the allowlist names. The browser half (the pages in Chromium, formgrader's
header, the feedback's <meta>) is tests/browser/test_hostile_markup.py.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from traitlets.config.loader import PyFileConfigLoader

from lmpolicy_grader.nbgrader_plugins.feedback_exporter import FeedbackHTMLExporter
from lmpolicy_grader.content_policy import mathjax_loader, policy, script_hash
from lmpolicy_grader.nbgrader_plugins.sanitize_markup import (ATTRIBUTES, LINK_SCHEMES, STYLE_PROPERTIES, TAGS,
                                                         SanitizedMarkdown, SanitizeMarkup, clean_html,
                                                         ensure_sanitized)
from tests.conftest import ROOT

PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()
RUN = "window.__pwned=1"


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def assert_inert(html: str) -> None:
    """Every tag, attribute, URL and style property of ``html`` is one the allowlist names."""
    parser = _Tags()
    parser.feed(html)
    for tag, attributes in parser.found:
        assert tag in TAGS, (tag, html)
        for name, value in attributes.items():
            allowed = ATTRIBUTES["*"] | ATTRIBUTES.get(tag, set()) | {"class", "rel"}
            assert name in allowed, (tag, name, html)
            if name == "href":
                assert re.match(r"(%s):|#" % "|".join(LINK_SCHEMES), value, re.IGNORECASE), (value, html)
            if name == "src":
                assert re.fullmatch(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*|[\w./ -]+", value) \
                    and ".." not in value and not value.startswith("/"), (value, html)
            if name == "style":
                properties = {part.split(":")[0].strip() for part in value.split(";") if part.strip()}
                assert properties <= STYLE_PROPERTIES and "url(" not in value, (value, html)
    assert not re.search(r"<\s*(script|style|iframe|object|embed|form|svg|meta|base|link)\b", html, re.IGNORECASE)


ATTACKS = {
    "an onerror image": f"<img src=x onerror={RUN}>",
    "mixed case": f"<IMG SRC=x OnErRoR={RUN}>",
    "an entity-encoded attribute name": f'<img src=x o&#110;error="{RUN}">',
    "an entity-encoded javascript: link": f'<a href="jav&#x61;script:{RUN}">x</a>',
    "a javascript: link with tab and case": f'<a href="Java\tScRiPt:{RUN}">x</a>',
    "a script": f"<script>{RUN}</script>",
    "a script in another case": f"<ScRiPt>{RUN}</sCrIpT>",
    "an SVG script": f"<svg><script>{RUN}</script></svg>",
    "an SVG onload": f'<svg onload="{RUN}"></svg>',
    "a form": '<form action="/formgrader/api/grade/x" method="post"><input name="s" value="9"><button>go</button></form>',
    "an iframe": f'<iframe src="/formgrader" srcdoc="<script>{RUN}</script>"></iframe>',
    "an object and an embed": '<object data="x.swf"></object><embed src="x.swf">',
    "a style element that loads": "<style>body{background:url(http://evil.example/x)}</style>",
    "a style attribute that loads": '<p style="background-image:url(http://evil.example/x);color:red">p</p>',
    "a style that lays itself over the page": '<div style="position:fixed;top:0;z-index:9;margin-top:-50px">x</div>',
    "a meta refresh": '<meta http-equiv="refresh" content="0;url=http://evil.example/">',
    "a base": '<base href="http://evil.example/">',
    "an external stylesheet": '<link rel="stylesheet" href="http://evil.example/x.css">',
    "a tracking image": '<img src="http://evil.example/pixel.png">',
    "a srcset": '<img srcset="http://evil.example/x.png 1x">',
    "a data: page": f'<a href="data:text/html,<script>{RUN}</script>">x</a><img src="data:text/html;base64,PHNjcmlwdD4=">',
    "an SVG as a data: image": '<img src="data:image/svg+xml;base64,PHN2Zz48c2NyaXB0Pjwvc2NyaXB0Pjwvc3ZnPg==">',
    "a width that breaks out": f'<img src="plot.png" width="1 onerror={RUN}">',
    "a path up": '<img src="../../../source/ch11/01_x.png"><img src="/files/secret.png">',
    "an id that takes a score input's": '<span id="ex3__manual" name="formgrader">x</span>',
    "a class of the page's controls": '<span class="full-credit btn score tabbable">x</span>',
    "mutation XSS through math": f'<math><mtext><table><mglyph><style><img src=x onerror={RUN}></style></mglyph></table></mtext></math>',
    "a template": f"<template><img src=x onerror={RUN}></template>",
    "a details ontoggle": f'<details open ontoggle="{RUN}"><summary>s</summary></details>',
    "a comment that closes early": f"<!--><img src=x onerror={RUN}>-->",
    "noscript parsing": f'<noscript><p title="</noscript><img src=x onerror={RUN}>">',
}


@pytest.mark.parametrize("html", ATTACKS.values(), ids=ATTACKS.keys())
def test_every_attack_form_comes_out_inert(html):
    cleaned = clean_html(html)
    assert_inert(cleaned)
    assert "javascript" not in "".join(re.findall(r"<[^>]*>", cleaned)).lower()


HONEST = {
    "emphasis and code": ("**bold** and *it* and `code`", ["<strong>bold</strong>", "<em>it</em>", "<code>code</code>"]),
    "math": (r"Because $x^2 = x \cdot x$ and $$\frac{a}{b} < 1$$", [r"$x^2 = x \cdot x$", r"$$\frac{a}{b} &lt; 1$$"]),
    "a table": ("| a | b |\n|---|---|\n| 1 | 2 |", ["<table>", "<th>a</th>", "<td>2</td>"]),
    "a list and a link": ("- one\n- [two](https://example.org/x)", ["<li>one</li>", 'href="https://example.org/x"']),
    "a heading": ("## A part", ["<h2>A part"]),
    "an embedded image": (f"![plot](data:image/png;base64,{PNG})", [f'src="data:image/png;base64,{PNG}"', 'alt="plot"']),
    "an image of the folder": ("![plot](figures/plot.png)", ['src="figures/plot.png"']),
    "a hint": ("<details><summary>Hint</summary>look</details>", ["<details><summary>Hint</summary>look</details>"]),
    "highlighted code": ("```python\ndef f(x):\n    return x\n```", ['<div class="highlight">', '<span class="k">def</span>']),
    "coloured text": ('<span style="color: red">red</span>', ['<span style="color:red">red</span>']),
}


@pytest.mark.parametrize("markdown, kept", HONEST.values(), ids=HONEST.keys())
def test_honest_markdown_math_tables_and_images_survive(markdown, kept):
    exporter = HTMLExporter()
    html = SanitizedMarkdown(parent=exporter)({"cell": {}}, markdown)
    assert_inert(html)
    for piece in kept:
        assert piece in html, (piece, html)


def _output(data, metadata=None):
    return nbformat.v4.new_output("display_data", data=data, metadata=metadata or {})


def _notebook_with_outputs():
    code = nbformat.v4.new_code_cell("x", execution_count=1)
    code.outputs = [
        _output({"text/html": f"<b>bold</b><script>{RUN}</script>", "text/plain": "<HTML>"}),
        _output({"application/javascript": RUN, "text/plain": "<Javascript>"}),
        _output({"application/vnd.jupyter.widget-view+json": {"model_id": "m"}, "text/plain": "a widget"}),
        _output({"text/html": f"<script>{RUN}</script>"}, {"text/html": {"isolated": True}}),
        _output({"image/png": f'"><img src=x onerror={RUN}>'}),
        _output({"image/png": PNG}, {"image/png": {"width": f"1 onerror={RUN}", "height": 20, "alt": "a plot"}}),
        _output({"image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{RUN}"><circle r="3"/></svg>'}),
        _output({"text/markdown": f"*md* <img src=x onerror={RUN}>"}),
        _output({"text/latex": f"$y$ <img src=x onerror={RUN}>"}),
        _output({"text/vnd.mermaid": "graph TD; A-->B", "application/x-unknown": "?"}),
        nbformat.v4.new_output("stream", name="stdout", text=f"<script>{RUN}</script>\n"),
        nbformat.v4.new_output("error", ename="E", evalue=f"<img src=x onerror={RUN}>", traceback=[f"<b onclick={RUN}>"]),
    ]
    raw = nbformat.v4.new_raw_cell(f"<img src=x onerror={RUN}>", metadata={"raw_mimetype": "text/html"})
    markdown = nbformat.v4.new_markdown_cell(f"$z$ ![a](attachment:a.png) ![b](attachment:b.html) <img src=x onerror={RUN}>")
    markdown.attachments = {"a.png": {"image/png": PNG}, "b.html": {"text/html": base64.b64encode(b"<script>").decode()}}
    nb = nbformat.v4.new_notebook(cells=[markdown, raw, code])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    return nb


def test_outputs_keep_only_the_allowed_types_cleaned():
    nb, _ = SanitizeMarkup().preprocess(_notebook_with_outputs(), {})
    outputs = nb.cells[2].outputs
    assert outputs[0].data == {"text/html": "<b>bold</b>", "text/plain": "<HTML>"}
    assert outputs[1].data == {"text/plain": "<Javascript>"} and outputs[2].data == {"text/plain": "a widget"}
    assert outputs[3].metadata == {} and outputs[3].data == {"text/html": ""}  # no isolated iframe
    # the PNG whose "base64" breaks out is gone (not base64), as is the output of types the allowlist does not name
    assert outputs[4].metadata == {"image/png": {"height": 20, "alt": "a plot"}}  # the width that broke out dropped
    assert set(outputs[5].data) == {"image/svg+xml"}
    assert [output.output_type for output in outputs].count("display_data") == 8
    assert "widgets" not in nb.metadata
    assert nb.cells[0].attachments == {"a.png": {"image/png": PNG}, "b.html": {"text/plain": ""}}


@pytest.mark.parametrize("template", ["lab", "classic"])
def test_a_whole_page_made_from_a_hostile_notebook_is_inert_and_keeps_the_honest_part(template):
    exporter = HTMLExporter(template_name=template)
    ensure_sanitized(exporter)
    page, _ = exporter.from_notebook_node(_notebook_with_outputs())
    body = page[page.index("<body"):]
    assert RUN not in re.sub(r"&[a-z]+;|&#\d+;", "", "".join(re.findall(r"<[^>]*>", body)))  # in no tag
    assert "<script" not in body.split("</html>")[0].replace('<script type="text/x-mathjax-config">', "") \
        or template == "lab"  # classic has no script in its body; lab's are nbconvert's own below
    assert re.search(r'<img [^>]*src="data:image/svg\+xml;base64,', body)  # SVG only as an image
    assert "<b>bold</b>" in body and "$z$" in body
    assert f'src="data:image/png;base64,{PNG}"' in body  # the attachment, an image


class _AddsHtmlLater(Preprocessor):
    """A feedback preprocessor registered after the configured ones that shows something of the student's."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            cell.outputs.append(_output({"text/html": f"<img src=x onerror={RUN}>handed in"}))
        return cell, resources


def test_the_feedback_exporter_sanitizes_last_whatever_its_configuration():
    exporter = FeedbackHTMLExporter(template_name="classic")  # no sanitizer configured at all
    exporter.register_preprocessor(_AddsHtmlLater, enabled=True)  # as nbgrader adds the feedback's
    page, _ = exporter.from_notebook_node(_notebook_with_outputs())
    assert "handed in" in page and "onerror" not in "".join(re.findall(r"<img[^>]*>", page))
    assert isinstance(exporter._preprocessors[-1], SanitizeMarkup)


def test_without_the_sanitizer_the_same_page_is_active():
    """What the tests above guard against: nbconvert alone keeps the scripts and handlers."""
    page, _ = HTMLExporter(template_name="classic").from_notebook_node(_notebook_with_outputs())
    assert f"<script>{RUN}</script>" in page and f"onerror={RUN}" in page


def _course_config():
    return PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()


def test_the_feedback_page_carries_its_policy_before_its_only_inline_script_which_the_policy_allows():
    import nbgrader
    bootstrap = Path(nbgrader.__file__).parent / "server_extensions/formgrader/static/node_modules/bootstrap/dist/css"
    exporter = FeedbackHTMLExporter(config=_course_config(), template_name="feedback",
                                    extra_template_paths=[str(bootstrap)])  # as GenerateFeedback sets them
    nb = _notebook_with_outputs()
    page, _ = exporter.from_notebook_node(nb, resources={"nbgrader": {"notebook": "01_x", "score": 0, "max_score": 1,
                                                                       "late_penalty": 0}})
    policy_at = page.index(f'<meta http-equiv="Content-Security-Policy" content="{policy()}">')
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, re.DOTALL)
    assert policy_at < page.index("<script")
    inline = [text for attributes, text in scripts if "src=" not in attributes]
    assert inline == [mathjax_loader()]  # the one inline script, exactly the text its hash allows
    assert script_hash(inline[0]) in policy()
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in policy()
    script_src = policy().split("script-src", 1)[1].split(";")[0]
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src and "data:" not in script_src


def test_the_course_config_puts_the_sanitizer_on_every_html_exporter():
    config = _course_config()
    exporter = HTMLExporter(config=copy.deepcopy(config))  # as formgrader makes its own
    assert any(isinstance(p, SanitizeMarkup) and p.enabled for p in exporter._preprocessors)
    assert isinstance(exporter.environment.filters["markdown2html"], SanitizedMarkdown)
