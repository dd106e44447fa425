"""No student markup is ever active: one allowlist sanitizer for every HTML view of a submission.

A submission's markdown (its written answers) and its outputs reach the feedback HTML and formgrader's grading
page, which runs with the instructor's session. Everything of it that a browser could make active passes through
``clean_html`` (nh3, the maintained binding of the Rust sanitizer Ammonia) with the allowlist below: tags, their
attributes, URLs, classes and style properties are listed, and the rest is dropped. So no script, event handler,
`javascript:` or `data:` URL (but a `data:` image of a raster type), form, iframe, object, style element, SVG or
raw HTML outside the list survives, whatever its case or entity encoding (the parser decodes both first).

Two hooks bring every view through it, both set in ``nbgrader_config.py`` for every ``HTMLExporter`` of the
course (formgrader's and the feedback's):
- ``SanitizeMarkup`` (a preprocessor; it also gives the page its Content-Security-Policy) keeps, of each output, only the types an allowlist names, HTML cleaned and
  image data checked to be base64; application/javascript and widget views are dropped (their text/plain stays);
  raw cells are cleaned; SVG is shown only as an ``<img>`` (where no script of it runs and it loads nothing).
- ``SanitizedMarkdown`` (the ``markdown2html`` filter) cleans the HTML that nbconvert makes of markdown: markdown
  cells, text/markdown outputs and formgrader's comments. Math stays text, which MathJax typesets.

nh3 is imported when something is cleaned, not when this module is: the student's Validate loads
nbgrader_config.py with the student's packages only (tests/test_environment.py).
"""
from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache

import jinja2
from nbconvert.preprocessors import Preprocessor
from traitlets.config import LoggingConfigurable

from lmpolicy_grader.content_policy import new_nonce, policy

# --- the allowlist ----------------------------------------------------------------------------------------------

# What markdown and honest HTML outputs (pandas tables, rich reprs) are made of. No form, input, button, iframe,
# object, embed, svg, math, style, link, meta, base, map/area.
TAGS = frozenset({
    "a", "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del",
    "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i",
    "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike", "strong",
    "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "var", "wbr",
})
# Dropped with everything inside them (their text would otherwise show as text, or mean something).
DROPPED_WITH_CONTENT = frozenset({
    "script", "style", "template", "noscript", "iframe", "frame", "frameset", "object", "embed", "applet", "svg",
    "math", "textarea", "select", "title", "xmp", "noembed", "noframes", "plaintext", "head",
})
# No id and no name anywhere: a student's element could otherwise take the id of a score input of the grading
# page, or a name that shadows one of its scripts' globals.
_CELL = {"align", "colspan", "rowspan", "scope", "headers"}
ATTRIBUTES = {
    "*": {"title", "lang", "dir", "style"},  # and class, by the list of _classes()
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": _CELL, "th": _CELL,
    "table": {"border", "align"}, "col": {"span", "align"}, "colgroup": {"span", "align"},
    "ol": {"start"}, "details": {"open"},
}
# Colours and alignment: what honest tables and text use. Nothing that positions an element over the page's own
# controls (position, margin, transform, z-index) or loads anything (url() lives in background, list-style,
# content, cursor, border-image, mask, filter, font: none of them is listed).
STYLE_PROPERTIES = frozenset({"color", "background-color", "text-align", "vertical-align", "font-weight",
                              "font-style", "text-decoration", "white-space"})
RASTER_IMAGE_TYPES = ("png", "jpeg", "gif", "webp")
LINK_SCHEMES = ("http", "https", "mailto")

_DATA_IMAGE = re.compile(r"data:image/(?:%s);base64,[A-Za-z0-9+/=\s]*" % "|".join(RASTER_IMAGE_TYPES))
# An image of the submission's own folder, by a plain relative path (no scheme, no host, no way up, no query).
_OWN_IMAGE = re.compile(r"(?!/)(?!.*(?:^|/)\.\.(?:/|$))[\w./ -]+\.(?:png|jpe?g|gif|webp)", re.IGNORECASE)
_LINK = re.compile(r"(?:(?:%s):|#)" % "|".join(LINK_SCHEMES), re.IGNORECASE)
_NUMBER = re.compile(r"\d{1,5}(?:\.\d+)?%?")


@lru_cache(maxsize=1)
def _classes() -> dict[str, set[str]]:
    """The classes nbconvert's markdown and honest outputs use: code highlighting (pygments' token classes, from
    pygments itself), pandas' tables, the heading anchors."""
    from pygments.token import STANDARD_TYPES
    tokens = {name for name in STANDARD_TYPES.values() if name}
    return {"span": tokens, "div": {"highlight"}, "table": {"dataframe"},
            "a": {"anchor-link"}}


def _attribute(tag: str, attribute: str, value: str) -> str | None:
    """Each URL and size by the allowlist (nh3 calls this for every attribute the lists above let through)."""
    if attribute == "src":
        return value if _DATA_IMAGE.fullmatch(value) or _OWN_IMAGE.fullmatch(value) else None
    if attribute == "href":
        return value if _LINK.match(value) else None
    if attribute in ("width", "height"):
        return value if _NUMBER.fullmatch(value) else None
    return value


def clean_html(html: str) -> str:
    """``html`` with only what the allowlist names: the one sanitizer of every view of a submission."""
    import nh3  # the grader's and instructor's package only (see the module's docstring)

    return nh3.clean(html, tags=set(TAGS), clean_content_tags=set(DROPPED_WITH_CONTENT), attributes=ATTRIBUTES,
                     attribute_filter=_attribute, strip_comments=True, link_rel="noopener noreferrer nofollow",
                     url_schemes={*LINK_SCHEMES, "data"}, allowed_classes=_classes(),
                     filter_style_properties=set(STYLE_PROPERTIES))


# --- outputs ----------------------------------------------------------------------------------------------------

def _is_base64(data) -> bool:
    if not isinstance(data, str):
        return False
    try:
        base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _text(data):
    return data if isinstance(data, str) else "".join(data) if isinstance(data, list) else None


# mimetype -> how its data is made safe (None: dropped). The templates escape text/plain and text/latex
# (MathJax typesets the latter); text/markdown is cleaned by the markdown2html filter when it is rendered.
_OUTPUT_TYPES = {
    "text/plain": _text,
    "text/latex": _text,
    "text/markdown": _text,
    "text/html": lambda data: None if _text(data) is None else clean_html(_text(data)),
    "image/png": lambda data: data if _is_base64(data) else None,
    "image/jpeg": lambda data: data if _is_base64(data) else None,
    # shown as <img src="data:image/svg+xml;base64,..."> (SanitizeMarkup sees to it): an image runs no script
    # and loads nothing
    "image/svg+xml": _text,
}
# of an output's metadata, only the sizes and text the templates write into an <img>, checked
_IMAGE_METADATA = {"width", "height", "alt", "unconfined"}


def _image_metadata(values) -> dict:
    if not isinstance(values, dict):
        return {}
    kept = {}
    for key in _IMAGE_METADATA & set(values):
        value = values[key]
        if key in ("width", "height") and not (isinstance(value, (int, float)) and not isinstance(value, bool)):
            continue
        if key == "alt" and not isinstance(value, str):
            continue
        kept[key] = value
    return kept


def sanitize_output(output) -> None:
    """``output`` (a notebook output node) made safe in place: its allowed data cleaned, the rest dropped."""
    if output.get("output_type") in ("display_data", "execute_result"):
        data = {}
        for mimetype, value in output.get("data", {}).items():
            make_safe = _OUTPUT_TYPES.get(mimetype)
            safe = make_safe(value) if make_safe else None
            if safe is not None:
                data[mimetype] = safe
        output["data"] = data
        metadata = output.get("metadata", {})
        output["metadata"] = {mimetype: _image_metadata(metadata[mimetype])
                              for mimetype in ("image/png", "image/jpeg") if mimetype in metadata}
    elif output.get("output_type") == "stream":
        output["text"] = _text(output.get("text")) or ""
    elif output.get("output_type") == "error":
        output["ename"], output["evalue"] = str(output.get("ename", "")), str(output.get("evalue", ""))
        output["traceback"] = [str(line) for line in output.get("traceback", [])]


def _raster_bundle(bundle) -> dict:
    """An attachment's raster images; else an empty text, whose data: URL the sanitizer drops (nbconvert fails the
    whole page on an attachment it cannot find or that holds nothing)."""
    images = {mimetype: value for mimetype, value in (bundle.items() if isinstance(bundle, dict) else ())
              if mimetype in ("image/png", "image/jpeg", "image/gif") and _is_base64(value)}
    return images or {"text/plain": ""}


class SanitizeMarkup(Preprocessor):
    """Every output of the notebook made safe (``sanitize_output``), raw cells cleaned, cell attachments kept only
    as raster images, the widget state dropped, and SVG shown as an image."""

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        resources["should_not_encode_svg"] = False  # SVG as <img src="data:...">, never inline
        # the page's policy, which formgrade_macros.html.j2 writes first in <head>: with the nonce formgrader_guard
        # sends in the header, or a new one where formgrader runs without it
        resources["csp_nonce"] = resources.get("csp_nonce") or new_nonce()
        resources["content_security_policy"] = policy(resources["csp_nonce"])
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            sanitize_output(output)
        if "outputs" in cell:  # an output left with nothing to show is no output
            cell.outputs = [output for output in cell.outputs if output.get("data", True)]
        if cell.cell_type == "raw":
            cell.source = clean_html(cell.source)
        if "attachments" in cell:  # markdown's ![](attachment:name) becomes a data: URL of the bundle's type
            cell.attachments = {name: _raster_bundle(bundle) for name, bundle in cell.attachments.items()}
        return cell, resources


class SanitizedMarkdown(LoggingConfigurable):
    """The ``markdown2html`` filter: nbconvert's markdown to HTML (its exporter's, cell attachments included), then
    ``clean_html``. nbconvert registers it with its exporter as parent."""

    jinja_pass_arg = jinja2.pass_context(lambda: None).jinja_pass_arg  # Jinja passes the template's context

    def __call__(self, context, source) -> str:
        return clean_html(self.parent.markdown2html(context, source))


def ensure_sanitized(exporter) -> None:
    """``exporter`` (an HTMLExporter about to export) sanitizes, whatever its configuration: its ``markdown2html`` is
    ``SanitizedMarkdown``, and a ``SanitizeMarkup`` runs after every other preprocessor, so that nothing another
    one adds (nbgrader registers the feedback's after the configured ones) is shown uncleaned."""
    if not isinstance(exporter.environment.filters.get("markdown2html"), SanitizedMarkdown):
        exporter.register_filter("markdown2html", SanitizedMarkdown)
    if not any(isinstance(preprocessor, SanitizeMarkup) and preprocessor.enabled
               for preprocessor in exporter._preprocessors):
        exporter.register_preprocessor(SanitizeMarkup, enabled=True)
    exporter._preprocessors.sort(key=lambda preprocessor: isinstance(preprocessor, SanitizeMarkup))  # stable
