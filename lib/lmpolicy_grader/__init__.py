"""The instructor's side of the course: nbgrader glue, parallel grading, honest reports.

`python -m lmpolicy_grader --help` lists the commands; docs/architecture.md maps the subpackages. The
kernels import parts of it (``trusted_tests.call_server``, ``kernels.moving_in``), so this package
itself imports nothing heavy.
"""
import sys

# jsonschema, imported by nbformat, imports rfc3987_syntax when it is installed (Jupyter's event
# schemas want it) to check the "iri" formats, and it builds a parser as it is imported: 0.7 s in
# every grader process, the main one, the local cluster's forkserver and each worker. No schema the
# grader validates (nbformat's) has those formats, so the grader's processes go without it.
sys.modules.setdefault("rfc3987_syntax", None)
