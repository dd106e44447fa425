"""A launch from the LMS (LTI 1.3) into the course's hub: deploy/jupyterhub_config.py with
LMPOLICY_HUB_AUTHENTICATOR=lti13 (deploy/lti.py), against a test platform played by this file.

The platform has an RSA key of its own and serves its JWKS from a local HTTP server. Each launch is the real
flow: the platform's third-party login initiation to the hub, the hub's redirect to the platform's authorization
endpoint (read here for its state and nonce, as the platform would), then the platform's form post of a signed
id_token (RS256, the claims of a resource-link launch) to the hub's launch URL. Who the hub logged in is read from
its REST API with the browser session the launch left. No user's server is spawned: the login is what is tested
(the hub's accounts here are no Unix accounts).
"""
from __future__ import annotations

import html
import json
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .hub import HUB_CONFIG, ROOT, VENV_BIN, Hub, Site, require

pytestmark = pytest.mark.slow

sys.path.insert(0, str(ROOT / "deploy"))
from lti import students_by_sourcedid  # noqa: E402

from lmpolicy_grader.class_grading.lms_export import MappingError  # noqa: E402

TAG = f"lti{secrets.token_hex(2)}"
INSTRUCTOR = f"{TAG}-instructor"
STUDENT, OTHER_STUDENT = f"{TAG}-student1", f"{TAG}-student2"
# the LMS's people: their SIS ids (LIS person_sourcedid) and the LMS's own opaque user ids (sub)
SIS_ID = {STUDENT: "SIS-1001", OTHER_STUDENT: "SIS-1002", INSTRUCTOR: "SIS-9001"}
UNMAPPED_SIS_ID = "SIS-4040"
ISSUER = "https://lms.example.edu"
CLIENT_ID = "10000000000042"
DEPLOYMENT_ID = "7:a1b2c3"
KID = "test-platform-key-1"
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


def rsa_key():
    from cryptography.hazmat.primitives.asymmetric import rsa
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Platform:
    """The LMS side: its key, its JWKS served on loopback, and the messages it signs."""

    def __init__(self):
        from jwt.algorithms import RSAAlgorithm

        self.key = rsa_key()
        jwk = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        jwks = json.dumps({"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}).encode()
        self.jwks_requests = 0
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                platform.jwks_requests += 1
                self.send_response(200 if self.path == "/jwks" else 404)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(jwks if self.path == "/jwks" else b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="lti-platform").start()

    @property
    def authorize_url(self) -> str:
        return f"{self.url}/auth"

    def id_token(self, nonce: str, target: str, sourcedid: str | None, role: str = LEARNER, key=None) -> str:
        """A signed resource-link launch message (LTI 1.3 Core, "Resource link launch request message")."""
        import jwt

        now = int(time.time())
        claims = {
            "iss": ISSUER, "aud": CLIENT_ID, "sub": f"lms-user-{secrets.token_hex(4)}", "nonce": nonce,
            "iat": now, "exp": now + 300, "name": "A Student",
            LTI + "deployment_id": DEPLOYMENT_ID,
            LTI + "message_type": "LtiResourceLinkRequest",
            LTI + "version": "1.3.0",
            LTI + "target_link_uri": target,
            LTI + "resource_link": {"id": "ch11-link"},
            LTI + "roles": [role],
            LTI + "context": {"id": "course-42", "label": "LM-POLICY", "title": "Language models as policies"},
        }
        if sourcedid is not None:
            claims[LTI + "lis"] = {"person_sourcedid": sourcedid}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": KID})

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def write_mapping(folder: Path) -> list[Path]:
    """The grade export's mapping file (Canvas's columns) for the students, and one for the staff."""
    students = folder / "students.csv"
    students.write_text("student_id,name,sis_user_id,section\n"
                        f"{STUDENT},Ada,{SIS_ID[STUDENT]},A\n{OTHER_STUDENT},Grace,{SIS_ID[OTHER_STUDENT]},A\n")
    staff = folder / "staff.csv"
    staff.write_text(f"student_id,sis_user_id\n{INSTRUCTOR},{SIS_ID[INSTRUCTOR]}\n")
    return [students, staff]


@pytest.fixture(scope="module")
def platform():
    started = Platform()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def lti_hub(platform):
    """One hub for the module, logging in only from the test platform (no Unix accounts, no servers)."""
    require(shutil.which("configurable-http-proxy", path=str(ROOT / "node_modules" / ".bin")) is not None
            or shutil.which("configurable-http-proxy") is not None,
            "configurable-http-proxy is not installed: `make install-all` (npm, package.json)")
    require((VENV_BIN / "jupyterhub").exists(), f"jupyterhub is not installed in {VENV_BIN} (requirements-hub.txt)")
    root = Path(tempfile.mkdtemp(prefix="lmpolicy-lti-"))
    site = Site(root=root, exchange=root / "exchange", instructor=INSTRUCTOR, students=(STUDENT, OTHER_STUDENT),
                passwords={INSTRUCTOR: secrets.token_hex(20), STUDENT: secrets.token_hex(8)})  # never used
    state = root / "hub"
    state.mkdir(mode=0o700)
    hub = Hub(site=site, state=state)
    hub.configure(settings={
        "LMPOLICY_HUB_AUTHENTICATOR": "lti13",
        "LMPOLICY_HUB_LTI_LMS": "canvas",
        "LMPOLICY_HUB_LTI_ISSUER": ISSUER,
        "LMPOLICY_HUB_LTI_CLIENT_ID": CLIENT_ID,
        "LMPOLICY_HUB_LTI_AUTHORIZE_URL": platform.authorize_url,
        "LMPOLICY_HUB_LTI_JWKS_URL": f"{platform.url}/jwks",
        "LMPOLICY_HUB_LTI_MAPPING": ",".join(str(p) for p in write_mapping(root)),
    })
    try:
        hub.start()
        yield hub
    finally:
        hub.stop()
        shutil.rmtree(root, ignore_errors=True)


def launch(hub: Hub, platform: Platform, sourcedid: str | None, role: str = LEARNER, key=None):
    """One launch in a fresh browser session: (the hub's answer to the id_token's post, the session)."""
    import requests

    session = requests.Session()
    target = f"{hub.url}/hub/"
    started = session.post(f"{hub.url}/hub/lti13/oauth_login", allow_redirects=False, data={
        "iss": ISSUER, "login_hint": "opaque-login-hint", "target_link_uri": target,
        "client_id": CLIENT_ID, "lti_deployment_id": DEPLOYMENT_ID, "lti_message_hint": "opaque-message-hint"})
    assert started.status_code == 302, (started.status_code, started.text[-2000:], hub.log()[-3000:])
    where = urllib.parse.urlsplit(started.headers["Location"])
    assert f"{where.scheme}://{where.netloc}{where.path}" == platform.authorize_url
    asked = dict(urllib.parse.parse_qsl(where.query))
    # what an OIDC authentication request of LTI 1.3 must carry (1EdTech Security Framework, 5.1.1.2)
    assert {k: asked[k] for k in ("response_type", "response_mode", "scope", "prompt", "client_id", "login_hint",
                                  "lti_message_hint")} == {
        "response_type": "id_token", "response_mode": "form_post", "scope": "openid", "prompt": "none",
        "client_id": CLIENT_ID, "login_hint": "opaque-login-hint", "lti_message_hint": "opaque-message-hint"}
    assert asked["redirect_uri"] == f"{hub.url}/hub/lti13/oauth_callback"
    token = platform.id_token(asked["nonce"], target, sourcedid, role, key)
    answer = session.post(asked["redirect_uri"], data={"id_token": token, "state": asked["state"]},
                          allow_redirects=False)
    return answer, session


def logged_in_as(hub: Hub, session) -> dict | None:
    """The hub's REST API's model of the session's user (GET /hub/api/user), or None if nobody is logged in."""
    answer = session.get(f"{hub.url}/hub/api/user")
    if answer.status_code in (401, 403):
        return None
    assert answer.status_code == 200, (answer.status_code, answer.text)
    return answer.json()


def test_a_student_launching_from_the_lms_is_logged_in_as_their_course_id(lti_hub, platform):
    answer, session = launch(lti_hub, platform, SIS_ID[STUDENT])
    assert answer.status_code == 302, (answer.status_code, answer.text[-2000:], lti_hub.log()[-3000:])
    assert answer.headers["Location"] == "/hub/"  # the launch's target: the hub's start, then the student's server
    user = logged_in_as(lti_hub, session)
    assert user is not None and user["name"] == STUDENT and user["admin"] is False, user
    assert platform.jwks_requests >= 1  # the signature was checked against the platform's published key


def test_the_instructor_launches_as_an_admin_and_the_hub_holds_only_mapped_names(lti_hub, platform):
    launch(lti_hub, platform, SIS_ID[STUDENT])
    answer, session = launch(lti_hub, platform, SIS_ID[INSTRUCTOR], role=INSTRUCTOR_ROLE)
    assert answer.status_code == 302, (answer.status_code, answer.text[-2000:])
    me = logged_in_as(lti_hub, session)
    assert me["name"] == INSTRUCTOR and me["admin"] is True, me
    listed = session.get(f"{lti_hub.url}/hub/api/users")
    assert listed.status_code == 200, listed.text
    names = {user["name"] for user in listed.json()}
    assert STUDENT in names and names <= {INSTRUCTOR, STUDENT, OTHER_STUDENT}, names


def test_a_token_signed_by_another_key_is_refused(lti_hub, platform):
    answer, session = launch(lti_hub, platform, SIS_ID[OTHER_STUDENT], key=rsa_key())
    assert answer.status_code == 400, (answer.status_code, answer.text[-2000:])
    assert "Signature verification failed" in answer.text
    assert logged_in_as(lti_hub, session) is None


@pytest.mark.parametrize("sourcedid, message", [
    (UNMAPPED_SIS_ID, f"Your LMS account (SIS id {UNMAPPED_SIS_ID}) is not on this course's student list"),
    (None, "Your LMS did not say who you are in the school's records"),
])
def test_an_lms_user_the_mapping_does_not_name_is_refused_with_a_message(lti_hub, platform, sourcedid, message):
    answer, session = launch(lti_hub, platform, sourcedid)
    assert answer.status_code == 403, (answer.status_code, answer.text[-2000:])
    page = html.unescape(answer.text)  # the hub's error page shows the message
    assert message in page and ("ask your instructor" in page or "tell your instructor" in page), page[-2000:]
    assert logged_in_as(lti_hub, session) is None
    # nobody was let in under another name: the hub holds no user beyond the mapped ones
    admin = launch(lti_hub, platform, SIS_ID[INSTRUCTOR], role=INSTRUCTOR_ROLE)[1]
    names = {user["name"] for user in admin.get(f"{lti_hub.url}/hub/api/users").json()}
    assert names <= {INSTRUCTOR, STUDENT, OTHER_STUDENT}, names


def test_one_lms_person_given_to_two_course_ids_across_the_mapping_files_is_an_error(tmp_path):
    students, staff = write_mapping(tmp_path)
    staff.write_text(f"student_id,sis_user_id\n{INSTRUCTOR},{SIS_ID[STUDENT]}\n")
    assert students_by_sourcedid([str(students)], "canvas")[SIS_ID[STUDENT]] == STUDENT
    with pytest.raises(MappingError, match=f"sis_user_id '{SIS_ID[STUDENT]}' is given to"):
        students_by_sourcedid([str(students), str(staff)], "canvas")


def _hub_config(monkeypatch, **environment):
    """deploy/jupyterhub_config.py as JupyterHub loads it, in the environment ``environment`` adds."""
    from jupyterhub.app import JupyterHub

    for name in [n for n in os.environ if n.startswith("LMPOLICY_")]:
        monkeypatch.delenv(name)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    hub = JupyterHub()
    hub.load_config_file(str(HUB_CONFIG))
    return hub.config


def test_without_the_switch_the_hub_logs_in_as_before(monkeypatch):
    assert _hub_config(monkeypatch).JupyterHub.authenticator_class == "pam"


def test_a_mapping_file_the_export_would_refuse_stops_the_hub_at_its_start(monkeypatch, tmp_path):
    students = tmp_path / "students.csv"
    students.write_text(f"student_id,sis_user_id\n{STUDENT},{SIS_ID[STUDENT]}\n{STUDENT},SIS-2\n")
    settings = {"LMPOLICY_HUB_AUTHENTICATOR": "lti13", "LMPOLICY_HUB_LTI_ISSUER": ISSUER,
                "LMPOLICY_HUB_LTI_CLIENT_ID": CLIENT_ID, "LMPOLICY_HUB_LTI_AUTHORIZE_URL": "https://lms.example.edu/auth",
                "LMPOLICY_HUB_LTI_JWKS_URL": "https://lms.example.edu/jwks"}
    with pytest.raises(MappingError, match=f"{students}, rows 2 and 3: student '{STUDENT}' twice"):
        _hub_config(monkeypatch, **settings, LMPOLICY_HUB_LTI_MAPPING=str(students))
    students.write_text(f"student_id,sis_user_id\n{STUDENT},{SIS_ID[STUDENT]}\n")
    config = _hub_config(monkeypatch, **settings, LMPOLICY_HUB_LTI_MAPPING=str(students))
    assert config.JupyterHub.authenticator_class.__name__ == "CourseLTI13Authenticator"
    assert config.CourseLTI13Authenticator.mapping_files == [str(students)]
