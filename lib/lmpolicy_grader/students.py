"""Whose notebook a kernel grades: the student's id, their variants, and their hidden inputs.

The student is the one nbgrader read off the submission's folder (``submitted/<student>/``), never
anything the notebook says. Both kernels of a notebook are told, before its first cell runs
(``kernels.moving_in.become_student``):

- the grading kernel: ``LMPOLICY_STUDENT_ID`` (or ``LMPOLICY_VARIANTS=off``), so that the student's
  code and the locked set-up cells see the student's own variant (``lmpolicy.per_student.variants``), and that
  variant's parameters, drawn here (``LMPOLICY_VARIANT_PARAMS``): the draw needs exact solvers that
  answer exercises, which the grading kernel's view of the library lacks (``isolation.library_view``);
- the trusted test kernel: the id, drawing the parameters itself, and ``LMPOLICY_HIDDEN_INPUTS``, a value made from
  the course's secret, the student's id and the submission itself (``submission_digest``), from which the hidden
  tests draw their random inputs (``lmpolicy.per_student.hidden_inputs``). The secret stays with the grader: no submission
  sees it or the value.

Why the submission is in the value: a submission can record the hidden inputs its functions are called with, and
whatever way it finds to read them back (a leak in a feedback, the autograded notebook, a friend's grader), the
only use of them is a lookup table handed in at the next grading. That table is a changed submission, so it is
called with new inputs; an unchanged submission re-graded is called with the same ones and keeps its grade.
The digest is of the whole notebook, not of each exercise: an exercise's answer can read anything the
notebook's other cells define, so a table in any cell (or in a file beside the notebook) must change every
exercise's inputs.

The course's secret is a file at the course root (made at the first grading, readable by its owner
only), or ``LMPOLICY_COURSE_SECRET`` where several machines grade one class.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from traitlets import Bool, Unicode
from traitlets.config import Configurable

from lmpolicy.per_student.hidden_inputs import HIDDEN_INPUTS_VARIABLE
from lmpolicy_grader.cells import is_test
from lmpolicy.per_student.variants import (HUB_USER_VARIABLE, OFF, PARAMS_VARIABLE, STUDENT_ID_VARIABLE, VARIANTS_OFF_VARIABLE,
                               drawn_for)

SECRET_VARIABLE = "LMPOLICY_COURSE_SECRET"


class Variants(Configurable):
    """The course's switch for per-student variants (``c.Variants.enabled`` in nbgrader_config.py)."""

    enabled = Bool(True, help="give every student their own numbers in the numeric exercises; False: "
                              "everyone gets the chapter's (self-study, or a course that wants the book's)").tag(config=True)
    secret_file = Unicode(".lmpolicy_course_secret", help="the course's secret, relative to the course root "
                          f"(made at the first grading; {SECRET_VARIABLE} takes its place when set)").tag(config=True)


def course_secret(course_root: Path | str, file_name: str = Variants.secret_file.default_value) -> bytes:
    """The course's secret: ``LMPOLICY_COURSE_SECRET``, else the file at the course root, made if missing."""
    if os.environ.get(SECRET_VARIABLE, "").strip():
        return os.environ[SECRET_VARIABLE].strip().encode()
    path = Path(course_root) / file_name
    if not path.exists():  # the first grading of the course: written whole, then linked in place, so that
        # graders making it at once all read the one linked first, never a file made but not yet written
        draft = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(8)}")
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    value = path.read_text().strip()
    if not value:
        raise RuntimeError(f"the course secret {path} is empty: delete it (a new one is made at the next "
                           f"grading, and every student's hidden inputs change) or write a secret into it")
    return value.encode()


def submission_digest(nb, folder: Path | str | None) -> str:
    """What the submission's process is given to run, as one digest: the source of every code cell the grading
    kernel runs, in order (answers, the cells a student added, the locked cells as the grader restored them;
    not the test cells, which never run there), and every file of the notebook's ``folder`` but the notebooks.

    Normalised to what the kernel can read and nothing less: a cell's source exactly as nbformat reads it (the
    kernel can read its own cells' text, comments and spacing included, so stripping any of it would leave a
    table room to hide); not the notebook's JSON layout, metadata, outputs or execution counts, which never
    reach the kernel, so that re-running and saving an unchanged notebook draws the same inputs. The notebooks
    of the folder are left out: the sandbox gives the kernel none of them, and they change as they are graded."""
    digest = hashlib.sha256()
    code = [cell.source for cell in nb.cells if cell.cell_type == "code" and not is_test(cell)]
    digest.update(json.dumps(["code cells", code]).encode())
    root = Path(folder) if folder is not None else None
    for path in sorted(root.rglob("*")) if root is not None and root.is_dir() else ():
        if path.name.endswith(".ipynb"):
            continue
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest.update(json.dumps(["link", name, os.readlink(path)]).encode())
        elif path.is_dir():
            digest.update(json.dumps(["folder", name]).encode())
        else:
            digest.update(json.dumps(["file", name, _file_digest(path)]).encode())
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as error:  # a file the grader cannot read: the kernel cannot either
        return f"unreadable: {error.strerror}"


def kernel_environments(config, course_root: Path | str, student: str | None,
                        submission: str) -> tuple[dict, dict]:
    """The variables (name -> value; None: unset) the grading kernel and the trusted test kernel take for
    ``student``'s ``submission`` (its ``submission_digest``), in that order. No student (a notebook graded outside
    nbgrader's course folders): none."""
    if not student:
        return {}, {}
    switch = Variants(config=config)
    grading = {HUB_USER_VARIABLE: None}  # on a hub, the grader's own user name must not become the id
    if switch.enabled:
        grading |= {STUDENT_ID_VARIABLE: student, VARIANTS_OFF_VARIABLE: None}
    else:
        grading |= {STUDENT_ID_VARIABLE: None, VARIANTS_OFF_VARIABLE: OFF}
    secret = course_secret(course_root, switch.secret_file)
    hidden = hmac.new(secret, f"hidden inputs of {student} for the submission {submission}".encode(),
                      hashlib.sha256).hexdigest()[:32]
    trusted = {**grading, PARAMS_VARIABLE: None, HIDDEN_INPUTS_VARIABLE: hidden}
    return {**grading, PARAMS_VARIABLE: drawn_for(student) if switch.enabled else None}, trusted
