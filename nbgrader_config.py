"""nbgrader configuration of the course `lm-policy`, assignment `ch11` (see docs/instructors.md).

Stock nbgrader 0.9.6 plus the preprocessors of `lmpolicy_grader.nbgrader_plugins` that close its holes: a
duplicated cell no longer fails the notebook, deleted locked cells come back, the submission runs in a
limited, sandboxed kernel and the tests in a trusted one, a notebook's grades are stored whole or not at
all, and feedback shows neither hidden tests nor a 0 for an answer not graded by hand yet; and an exporter
whose `nbgrader export` marks a submission that could not be graded FAILED instead of scoring it 0.
"""
# --- Validate (the student's button and `nbgrader validate`): each failing check as its short ✗ lines under its
# exercise's name, not the check cell's source. First, so that it holds even if a later line fails to load.
from lmpolicy.notebook.validator import use_in_nbgrader

use_in_nbgrader()

import os
import sys
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput,
                                    GetGrades, IgnorePattern, LimitOutput, OverwriteCells, OverwriteKernelspec)

import lmpolicy_grader
import nbgrader
from lmpolicy_grader.nbgrader_plugins.export import StatusCsvExportPlugin
from lmpolicy_grader.content_policy import mathjax_loader, policy
from lmpolicy_grader.nbgrader_plugins.feedback_exporter import FeedbackHTMLExporter
from lmpolicy_grader.nbgrader_plugins import (DeduplicateGradeIds, GradingExecute, HideHiddenTests,
                                           RestoreDeletedCells, SaveAutoGradesWhole)
from lmpolicy_grader.nbgrader_plugins.outputs_as_handed_in import OutputsAsHandedIn
from lmpolicy_grader.nbgrader_plugins.released_metadata import ReleasedMetadata
from lmpolicy_grader.nbgrader_plugins.sanitize_markup import SanitizedMarkdown, SanitizeMarkup
from lmpolicy_grader.nbgrader_plugins.show_student_parameters import ShowStudentParameters
from lmpolicy_grader.nbgrader_plugins.show_pending_grades import PENDING_AWARE_FILTERS, ShowPendingGrades

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

COURSE_ROOT = Path(__file__).resolve().parent

# nbgrader runs `alembic` as a subprocess when it opens a new gradebook: whoever loads this file (the
# grader, its workers, `nbgrader ...`, formgrader) finds the one next to this interpreter, venv or not.
_BIN = os.path.dirname(sys.executable)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

# --- the course -------------------------------------------------------------------------------
c.CourseDirectory.course_id = "lm-policy"
c.CourseDirectory.root = str(COURSE_ROOT)
# the one assignment, ch11, enters the gradebook when `generate_assignment ch11` runs (nbgrader 0.9
# has no db_assignments option any more)
# the gradebook is SQLite at the course root (nbgrader's embedded default, for one machine); on JupyterHub
# with many graders, LMPOLICY_GRADEBOOK_URL points it at PostgreSQL instead, in the form
# postgresql+psycopg2://USER:PASSWORD@HOST:5432/DATABASE (name the driver: SQLAlchemy 2.1 reads a bare
# postgresql:// as psycopg 3, which is not installed). The grader checks the URL before it grades
# (lib/lmpolicy_grader/class_grading/gradebook.py: a wrong one stops it with the cause, never a quiet SQLite file) and takes
# no lock of its own on PostgreSQL (docs/deployment.md).
c.CourseDirectory.db_url = ((os.environ.get("LMPOLICY_GRADEBOOK_URL") or "").strip()
                             or f"sqlite:///{COURSE_ROOT / 'gradebook.db'}")

# --- the exchange (release_assignment, fetch, submit, collect). On one machine: a folder of the course, made
# here and ignored by git, so nbgrader and formgrader no longer look for (and warn about) the missing default
# /usr/local/share/nbgrader/exchange. On a JupyterHub every user's nbgrader must see one shared folder: the
# admin makes /srv/nbgrader/exchange (docs/deployment.md) and, once it exists, this course uses it.
# LMPOLICY_EXCHANGE names another shared folder (a hub whose exchange lives elsewhere, the deployment tests).
SHARED_EXCHANGE = Path(os.environ.get("LMPOLICY_EXCHANGE") or "/srv/nbgrader/exchange")
if SHARED_EXCHANGE.is_dir():
    c.Exchange.root = str(SHARED_EXCHANGE)
else:
    c.Exchange.root = str(COURSE_ROOT / "exchange")
    (COURSE_ROOT / "exchange").mkdir(exist_ok=True)

# collect (`nbgrader collect`, formgrader's button) never takes a submission whose copy into the exchange was
# cut off, as stock nbgrader 0.9.6 does (it then replaces the student's last complete one): lmpolicy_grader/class_grading/exchange.py
c.ExchangeFactory.collect = "lmpolicy_grader.class_grading.exchange.ExchangeCollectComplete"

# --- autograding: sanitize, then execute in the limited kernel ---------------------------------
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateGradeIds,   # a duplicated cell: the last copy keeps the grade id
    ReleasedMetadata,      # each cell's grade/answer flags and points as released; a grade id of its own dropped
    OverwriteKernelspec,
    OverwriteCells,        # edited locked and test cells get their source (with hidden tests) back
    RestoreDeletedCells,   # deleted locked and grade cells come back where the release had them
    CheckCellMetadata,
]
c.Autograde.autograde_preprocessors = [
    GradingExecute,        # limited kernel, per-notebook timeouts, output cap; tests in a trusted kernel
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    ShowStudentParameters,  # each varying exercise's parameters for the folder's student, not what the kernel printed
    SaveAutoGradesWhole,   # one transaction per notebook: its grades are stored whole or not at all
    AssignLatePenalties,
    CheckCellMetadata,
]
c.OverwriteCells.add_missing_cells = False  # RestoreDeletedCells does it, for locked cells too
c.RestoreDeletedCells.course_root = str(COURSE_ROOT)

# The bubblewrap sandbox of the grading kernel (lib/lmpolicy_grader/isolation/sandbox.py, docs/instructors.md)
# is on: a submission sees only its own notebook's folder. `python -m lmpolicy_grader grade --sandbox off`
# grades without it for one run; where it cannot be made, grading stops and says how to enable it.
c.GradingKernelManager.sandbox = True
# The limits of grading (cell timeout, notebook budget, output cap; the kernel's memory and CPU time)
# are the defaults of GradingExecute and GradingKernelManager in lib/lmpolicy_grader, where their help
# says why; set them here only to change them. Notebook 08 trains for longer than the defaults allow:
c.GradingExecute.cell_timeouts = {"08_tinylm_reinforce": 120}
c.GradingExecute.notebook_budgets = {"08_tinylm_reinforce": 360}
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 40

# --- every student their own numbers (lib/lmpolicy/per_student/variants.py, docs/instructors.md "Variants"): the grader gives
# both kernels the student of the submission's folder. False: everyone is graded on the chapter's numbers (set
# LMPOLICY_VARIANTS=off in the students' servers too). The hidden tests' random inputs differ per student either
# way, drawn from the course secret (c.Variants.secret_file at the course root, made at the first grading).
c.Variants.enabled = True

# --- export: `nbgrader export` writes nbgrader_export.csv with a status column (FAILED, never a silent 0)
c.ExportApp.plugin_class = StatusCsvExportPlugin

# --- feedback: no hidden tests, no hidden assertion lines in tracebacks; the outputs as handed in, none made while
# graded (lib/lmpolicy_grader/nbgrader_plugins/outputs_as_handed_in.py); an answer not graded yet
# reads "not graded yet", not 0 (the filters let the feedback template print that text)
c.GenerateFeedback.preprocessors = [GetGrades, ShowPendingGrades, HideHiddenTests, OutputsAsHandedIn,
                                     ShowStudentParameters, CSSHTMLHeaderPreprocessor]
c.GenerateFeedback.exporter_class = FeedbackHTMLExporter  # nbconvert's HTML, its templates compiled once per worker

# --- every view of a submission (the feedback, formgrader's grading page) is inert: its markdown and outputs pass one
# allowlist sanitizer (lib/lmpolicy_grader/nbgrader_plugins/sanitize_markup.py: the preprocessor for outputs, the
# markdown2html filter for markdown; the feedback's exporter runs the preprocessor last whatever this list says), and
# the page carries a Content-Security-Policy that refuses every inline script but the MathJax loader
# (lib/lmpolicy_grader/content_policy.py). Formgrader sends that policy as a header too, and serves a submission's
# files only as images, with lmpolicy_grader.formgrader_guard (a server extension: jupyter-config/instructor).
# MathJax without internet: the templates' mathjax.html.j2 loads the MathJax 2.7 of the pinned package
# jupyter-server-mathjax (from its folder when the file is opened from disk, from the Jupyter server's
# /static/jupyter_server_mathjax/ when served); the two filters write that loader and the policy.
c.HTMLExporter.preprocessors = [SanitizeMarkup]
c.HTMLExporter.filters = {**PENDING_AWARE_FILTERS, "markdown2html": SanitizedMarkdown,
                          "mathjax_loader": lambda _: mathjax_loader(),
                          "content_security_policy": lambda _: policy()}
c.HTMLExporter.extra_template_basedirs = [
    str(Path(lmpolicy_grader.__file__).resolve().parent / "templates"),  # first: its mathjax.html.j2 and formgrade_macros win
    str(Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"),
]
