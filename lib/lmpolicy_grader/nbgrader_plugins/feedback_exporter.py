"""The feedback's HTML exporter: nbconvert's, sanitized, with two costs of each notebook's feedback taken away.

- **Sanitized, whatever the configuration.** Every export passes the submission's markdown and outputs through
  the course's allowlist sanitizer, after every other preprocessor (``sanitize_markup.ensure_sanitized``).

- **Templates compiled once per grading process.** nbgrader makes a new exporter for every notebook's
  feedback, and nbconvert a new Jinja environment for every exporter, so the feedback templates
  (nbconvert's classic HTML and nbgrader's feedback page, about ten files) would be compiled again for
  every notebook: a third of a second of each. Their compiled code is kept for the life of the process, keyed
  by template and checked against the template's source (Jinja's bytecode cache), so an edited template
  is compiled afresh.
- **No second parse of the page.** nbconvert's HTMLExporter parses the whole page it has just rendered
  with BeautifulSoup (html.parser) to give images without alt text one, and the lab template's input and
  output areas a tabindex, then writes it out again: 0.1-0.5 s a notebook, up to 40% of its feedback
  (bench/bench_sandbox.py). The same three edits are made here on the rendered text.
- **The filters of the feedback page** (``templates/feedback/index.html.j2``, WCAG 2.1 AA): ``part_names``, what
  the page calls each scored or answered cell ("Exercise 11.1(a): its check cell"), in its links and headings;
  ``demote_headings``, the notebook's headings one level down under the page's own h1; ``code_colours``, the CSS
  of ``CODE_STYLE``, a Pygments style whose every token colour is at least 4.5:1 on the code's white;
  ``ansi2html``, nbconvert's, with every colour an output's 256-colour or RGB escape codes name for text on the
  output's white (IPython's tracebacks colour their comments rgb(95,135,135), 4.1:1) darkened, its hue kept, to
  at least 4.5:1 (``LEGIBLE_CONTRAST``). The 16 basic ANSI colours are classes the page gives no colour.
"""
from __future__ import annotations

import re
from collections import Counter

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.ansi import ansi2html
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

from lmpolicy.notebook.catalogue import exercise_key, label
from lmpolicy_grader.nbgrader_plugins.sanitize_markup import ensure_sanitized

NO_ALT_TEXT = "No description has been provided for this image"  # nbconvert's words
_IMAGE_WITHOUT_ALT = re.compile(r"<img(?![^>]*\salt=)")
_FOCUSABLE_AREA = re.compile(r'<div class="((?:[^"]* )?(?:jp-Cell-inputWrapper|jp-OutputArea-output)(?: [^"]*)?)"')
# Pygments' Xcode colours: its least contrasting token colour (attribute names, #836C28) is 5.1:1 on white, where
# the default style's comments and decorators fall to 4.5:1 and under on the page's greys.
CODE_STYLE = "xcode"
# One whole tag of serialized HTML, its quoted attribute values included (a "<" there is not a tag); and a
# heading's opening or closing tag at the start of one.
_TAG = re.compile(r"""<(?:[^>"']|"[^"]*"|'[^']*')*>""")
_HEADING_TAG = re.compile(r"<(/?)h([1-6])(?=[\s/>])", re.IGNORECASE)
# A span nbconvert's ansi2html colours with a text colour and no background of its own (so on the output's white).
_ANSI_TEXT_COLOUR = re.compile(r'<span style="color: rgb\((\d+),(\d+),(\d+)\)">')
LEGIBLE_CONTRAST = 4.5  # WCAG 2.1 AA, normal text


class _CompiledTemplates(jinja2.BytecodeCache):
    """Jinja's bytecode cache, in memory."""

    def __init__(self):
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self._code:
            bucket.bytecode_from_string(self._code[bucket.key])  # dropped by Jinja if the source changed

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


COMPILED_TEMPLATES = _CompiledTemplates()


class FeedbackHTMLExporter(HTMLExporter):
    """HTMLExporter (configured as ``c.HTMLExporter``) that sanitizes and compiles its templates once per process."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = COMPILED_TEMPLATES
        return environment

    def default_filters(self):
        yield from super().default_filters()
        yield from {"part_names": part_names, "demote_headings": demote_headings, "code_colours": code_colours,
                    "ansi2html": legible_ansi2html}.items()

    def from_notebook_node(self, nb, resources=None, **kw):
        """HTMLExporter's page, sanitized, with its accessibility edits made on the text instead of a parsed tree."""
        ensure_sanitized(self)
        language = nb.metadata.get("language_info", {})
        self.register_filter("highlight_code", self.filters.get(
            "highlight_code", Highlight2HTML(pygments_lexer=language.get("pygments_lexer", language.get("name")),
                                             parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata,
                                                                       parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return accessible(html), resources


def accessible(html: str) -> str:
    """``html`` with alt text on every image that has none, and the input and output areas focusable."""
    html = _IMAGE_WITHOUT_ALT.sub(f'<img alt="{NO_ALT_TEXT}"', html)
    return _FOCUSABLE_AREA.sub(r'<div class="\1" tabindex="0"', html)


def part_names(nb) -> dict[str, str]:
    """What the feedback page calls each cell a student answers or is scored on, by grade id: its exercise's label
    and what the cell is ("Exercise 11.1(a): its check cell", "Exercise 11.1(b): your written answer"), numbered
    where an exercise has two of a kind ("Lab Task 4: its check cell (2 of 2)")."""
    parts = [(cell.metadata.nbgrader["grade_id"], f"{_exercise_label(cell.metadata.nbgrader['grade_id'])}: "
              f"{_what_it_is(cell)}") for cell in nb.cells
             if cell.metadata.get("nbgrader", {}).get("grade_id") and _what_it_is(cell)]
    of_a_kind, seen = Counter(name for _, name in parts), Counter()
    names = {}
    for grade_id, name in parts:
        seen[name] += 1
        names[grade_id] = name if of_a_kind[name] == 1 else f"{name} ({seen[name]} of {of_a_kind[name]})"
    return names


def _what_it_is(cell) -> str | None:
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("task"):
        return "the task"
    if meta.get("solution"):
        return "your written answer" if cell.cell_type == "markdown" else "your answer"
    if meta.get("grade"):
        return "its check cell"
    return None  # a locked cell: shown as it is, with no name of its own


def _exercise_label(grade_id: str) -> str:
    try:
        return label(exercise_key(grade_id))
    except ValueError:  # a course whose grade ids name no exercise of the chapter's forms
        return f"Cell {grade_id}"


def demote_headings(html: str) -> str:
    """``html`` (serialized, as nbconvert and the sanitizer write it: every "<" of text escaped) with each heading
    one level down, h6 staying h6: under the feedback page's own h1, the notebook's title is its first h2."""
    def one_down(tag: re.Match) -> str:
        return _HEADING_TAG.sub(lambda heading: f"<{heading[1]}h{min(int(heading[2]) + 1, 6)}", tag[0], count=1) \
            if _HEADING_TAG.match(tag[0]) else tag[0]
    return _TAG.sub(one_down, str(html))


def code_colours(selector: str) -> str:
    """The CSS of ``CODE_STYLE`` for code highlighted inside ``selector``."""
    from pygments.formatters import HtmlFormatter
    return HtmlFormatter(style=CODE_STYLE).get_style_defs(selector)


def legible_ansi2html(text: str) -> str:
    """nbconvert's ``ansi2html`` of ``text``, each text colour on white darkened to ``LEGIBLE_CONTRAST``."""
    def legible(span: re.Match) -> str:
        red, green, blue = _on_white_at_least(LEGIBLE_CONTRAST, *(int(channel) for channel in span.groups()))
        return f'<span style="color: rgb({red},{green},{blue})">'
    return _ANSI_TEXT_COLOUR.sub(legible, ansi2html(text))


def _on_white_at_least(contrast: float, *rgb: int) -> tuple[int, ...]:
    """``rgb`` scaled towards black (same hue) until its contrast with white is at least ``contrast``."""
    def luminance(channels) -> float:
        linear = [c / 255 / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    scaled, factor = rgb, 1.0
    while 1.05 / (luminance(scaled) + 0.05) < contrast:
        factor -= 0.02
        scaled = tuple(round(channel * factor) for channel in rgb)
    return scaled
