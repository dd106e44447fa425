"""The student's library stands alone: importing any of its modules imports neither nbgrader nor the grader.

One module is nbgrader's by design: ``lmpolicy.notebook.validator``, the report of the student's Validate button, a subclass
of nbgrader's Validator (nbgrader is in the student's set). It may import nbgrader, never the grader, and no other
module of the library imports it."""
import pkgutil
import subprocess
import sys

import lmpolicy

VALIDATE_REPORT = "lmpolicy.notebook.validator"
MODULES = ["lmpolicy"] + [info.name for info in pkgutil.walk_packages(lmpolicy.__path__, "lmpolicy.")
                          if info.name != VALIDATE_REPORT]


def test_validates_report_imports_nbgrader_but_not_the_grader():
    program = (f"import importlib, sys\nimportlib.import_module({VALIDATE_REPORT!r})\n"
               "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lmpolicy_grader'))\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", f"importing {VALIDATE_REPORT} pulled in: {result.stdout.strip()}"


def test_every_lmpolicy_module_imports_without_nbgrader_or_the_grader():
    program = (
        "import importlib, sys\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nbgrader', 'lmpolicy_grader')))\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", f"importing lmpolicy pulled in: {result.stdout.strip()}"
    assert len(MODULES) > 20  # the walk found the library's modules, not an empty package
