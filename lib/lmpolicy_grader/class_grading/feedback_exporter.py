"""The feedback's HTML exporter: nbconvert's, with its templates compiled once per grading process.

nbgrader makes a new exporter for every notebook's feedback, and nbconvert a new Jinja environment
for every exporter, so the feedback templates (nbconvert's classic HTML and nbgrader's feedback
page, about ten files) were compiled again for every notebook: a third of a second of each. Their
compiled code is kept here for the life of the process, keyed by template and checked against the
template's source (Jinja's bytecode cache), so an edited template is compiled afresh.
"""
from __future__ import annotations

import jinja2
from nbconvert.exporters import HTMLExporter


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
    """HTMLExporter (configured as ``c.HTMLExporter``) whose templates are compiled once per process."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = COMPILED_TEMPLATES
        return environment
