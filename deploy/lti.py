"""The hub's login from the LMS (LTI 1.3): JupyterHub's own LTI13Authenticator, the student named by the course.

A launch is the LTI 1.3 / OIDC flow of `jupyterhub-ltiauthenticator`: the platform (Canvas, Moodle) starts a
third-party login at `<hub>/hub/lti13/oauth_login`, the hub sends the browser to the platform's authorization
endpoint with a state and a nonce, and the platform posts a signed `id_token` back to `<hub>/hub/lti13/oauth_callback`;
that package checks the signature against the platform's JWKS, the issuer, the audience (client id), the state,
the nonce and the LTI claims. This module only decides who the launch is.

Which claim: the LIS claim's `person_sourcedid` (`https://purl.imsglobal.org/spec/lti/claim/lis`), the person's
id in the school's student information system. Canvas sends the SIS User ID there, Moodle the user's ID number:
the very identifiers the course's LMS mapping file already holds for the grade export (`sis_user_id` for Canvas,
`idnumber` for Moodle; `python -m lmpolicy_grader export --lms ... --mapping students.csv`). One file then says
both who logs in as which course student and whose row a grade goes to, so the two cannot disagree. `sub` is an
opaque per-platform id that no gradebook file carries; an email address changes and a privacy setting hides it.

The mapping file is read with the export's own reader (`lms_export.read_mapping`) at every launch, so a student
added to it gets in without restarting the hub. A launch whose person maps to no course student is refused (403)
with a message saying what to ask the instructor: never let in under the LMS's own name.
"""
from __future__ import annotations

from pathlib import Path

from ltiauthenticator.lti13.auth import LTI13Authenticator
from tornado.web import HTTPError
from traitlets import CaselessStrEnum, List, Unicode

from lmpolicy_grader.class_grading.lms_export import MappingError, read_mapping

LIS_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/lis"
# the mapping file's column that holds, for each LMS, what that LMS sends as the LIS person_sourcedid
SOURCEDID_COLUMN = {"canvas": "sis_user_id", "moodle": "idnumber"}


def students_by_sourcedid(paths: list[str], lms: str) -> dict[str, str]:
    """{LMS person_sourcedid: course student id} of the mapping files ``paths``; MappingError for a file that cannot
    be used, or for one LMS person given to two course ids across the files."""
    column = SOURCEDID_COLUMN[lms]
    found: dict[str, tuple[str, str]] = {}
    for path in paths:
        rows = read_mapping(Path(path), lms, moodle_identifier="idnumber")
        for student, row in rows.items():
            sourcedid = row.get(column, "")
            if not sourcedid:
                continue  # a Canvas row identified by another id only: that student cannot launch from the LMS
            if sourcedid in found and found[sourcedid][0] != student:
                raise MappingError(f"{found[sourcedid][1]} and {path}: {column} {sourcedid!r} is given to "
                                   f"{found[sourcedid][0]!r} and to {student!r}")
            found[sourcedid] = (student, path)
    return {sourcedid: student for sourcedid, (student, _) in found.items()}


class CourseLTI13Authenticator(LTI13Authenticator):
    """LTI13Authenticator whose user is the course student id the mapping files give the launch's person."""

    lms = CaselessStrEnum(tuple(SOURCEDID_COLUMN), default_value="canvas", config=True,
                          help="The LMS that launches: which mapping column holds its person_sourcedid.")
    mapping_files = List(Unicode(), config=True,
                         help="The LMS mapping CSV files (the export's students.csv, and e.g. one for the staff).")
    contact = Unicode("your instructor", config=True, help="Whom a refused student should ask.")

    def mapping(self) -> dict[str, str]:
        try:
            return students_by_sourcedid(self.mapping_files, self.lms)
        except MappingError as error:
            self.log.error("LTI launch: the course's mapping cannot be read: %s", error)
            raise HTTPError(503, "%s", f"The course's student list cannot be read right now, so nobody can log in "
                                       f"from the LMS. Please tell {self.contact}.") from None

    async def authenticate(self, handler, data=None):
        token = data or {}
        sourcedid = str((token.get(LIS_CLAIM) or {}).get("person_sourcedid") or "").strip()
        if not sourcedid:
            self.log.warning("LTI launch refused: the id_token of sub %r has no person_sourcedid", token.get("sub"))
            raise HTTPError(403, "%s", "Your LMS did not say who you are in the school's records (its LTI launch "
                                       "carries no SIS id), so this hub cannot tell which student of the course you "
                                       f"are. Please tell {self.contact}: the LMS tool must share the user's SIS id.")
        student = self.mapping().get(sourcedid)
        if student is None:
            self.log.warning("LTI launch refused: person_sourcedid %r is in no mapping file", sourcedid)
            raise HTTPError(403, "%s", f"Your LMS account (SIS id {sourcedid}) is not on this course's student "
                                       f"list, so this hub cannot tell which student of the course you are. Please "
                                       f"ask {self.contact} to add you to the course's mapping file.")
        return {"name": student, "auth_state": token}

    def check_allowed(self, username, authentication=None):
        """A launch's user is allowed: authenticate names only the course's students (the mapping is the roster).
        Any other check (a user already in the hub's database at its start) goes by the configured users."""
        if authentication is not None and authentication.get("name") == username:
            return True
        return super().check_allowed(username, authentication)
