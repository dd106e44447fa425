"""Whose notebook a kernel grades: the student's id, their variants, and their hidden inputs.

The student is the one nbgrader read off the submission's folder (``submitted/<student>/``), never
anything the notebook says. Both kernels of a notebook are told, before its first cell runs
(``kernels.moving_in.become_student``):

- the grading kernel: ``LMPOLICY_STUDENT_ID`` (or ``LMPOLICY_VARIANTS=off``), so that the student's
  code and the locked set-up cells see the student's own variant (``lmpolicy.variants``), and that
  variant's parameters, drawn here (``LMPOLICY_VARIANT_PARAMS``): the draw needs exact solvers that
  answer exercises, which the grading kernel's view of the library lacks (``isolation.library_view``);
- the trusted test kernel: the id, drawing the parameters itself, and ``LMPOLICY_HIDDEN_INPUTS``, a value made from the student's id
  and the course's secret, from which the hidden tests draw their random inputs
  (``lmpolicy.hidden_inputs``). The secret stays with the grader: no submission sees it or the value.

The course's secret is a file at the course root (made at the first grading, readable by its owner
only), or ``LMPOLICY_COURSE_SECRET`` where several machines grade one class.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from traitlets import Bool, Unicode
from traitlets.config import Configurable

from lmpolicy.hidden_inputs import HIDDEN_INPUTS_VARIABLE
from lmpolicy.variants import (HUB_USER_VARIABLE, OFF, PARAMS_VARIABLE, STUDENT_ID_VARIABLE, VARIANTS_OFF_VARIABLE,
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


def kernel_environments(config, course_root: Path | str, student: str | None) -> tuple[dict, dict]:
    """The variables (name -> value; None: unset) the grading kernel and the trusted test kernel take for
    ``student``, in that order. No student (a notebook graded outside nbgrader's course folders): none."""
    if not student:
        return {}, {}
    switch = Variants(config=config)
    grading = {HUB_USER_VARIABLE: None}  # on a hub, the grader's own user name must not become the id
    if switch.enabled:
        grading |= {STUDENT_ID_VARIABLE: student, VARIANTS_OFF_VARIABLE: None}
    else:
        grading |= {STUDENT_ID_VARIABLE: None, VARIANTS_OFF_VARIABLE: OFF}
    secret = course_secret(course_root, switch.secret_file)
    hidden = hmac.new(secret, f"hidden inputs of {student}".encode(), hashlib.sha256).hexdigest()[:32]
    trusted = {**grading, PARAMS_VARIABLE: None, HIDDEN_INPUTS_VARIABLE: hidden}
    return {**grading, PARAMS_VARIABLE: drawn_for(student) if switch.enabled else None}, trusted
