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
"""
from __future__ import annotations

import re

import jinja2
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

from lmpolicy_grader.nbgrader_plugins.sanitize_markup import ensure_sanitized

NO_ALT_TEXT = "No description has been provided for this image"  # nbconvert's words
_IMAGE_WITHOUT_ALT = re.compile(r"<img(?![^>]*\salt=)")
_FOCUSABLE_AREA = re.compile(r'<div class="((?:[^"]* )?(?:jp-Cell-inputWrapper|jp-OutputArea-output)(?: [^"]*)?)"')


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
