"""JupyterHub for the course `lm-policy` on one machine: real local accounts, one JupyterLab per user.

Copy this file to the hub's configuration (e.g. /etc/jupyterhub/jupyterhub_config.py, started with
`jupyterhub -f /etc/jupyterhub/jupyterhub_config.py` as root) and set the names below, or give them
in the environment variables each line reads. `tests/deploy/test_hub.py` starts a hub with this very
file (its users, ports and folders through those variables) and runs the course's whole flow on it.

What it sets up:
- who may log in: the instructors (JupyterHub admins) and the students, each a local Unix account;
- each user's server is `jupyterhub-singleuser` (JupyterLab) of the course's venv, run as that
  account by LocalProcessSpawner, in the user's home;
- students get nbgrader's Assignment List and Validate, never formgrader (deploy/singleuser/student/);
  instructors get formgrader on their course folder, with a collect that never takes a submission whose
  copy into the exchange was cut off (deploy/singleuser/instructor/);
- every server is told where the shared exchange is (LMPOLICY_EXCHANGE) and, when the gradebook is a
  database server, where it is (LMPOLICY_GRADEBOOK_URL); the course's nbgrader_config.py reads both.
"""
import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821  (provided by JupyterHub when it loads this file)

DEPLOY = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent  # the hub runs from the course's venv; so do the users' servers


def _names(variable: str, default: str) -> set[str]:
    return {name.strip() for name in os.environ.get(variable, default).split(",") if name.strip()}


# --- who -----------------------------------------------------------------------------------------
# Local accounts (`useradd -m <name>`, home mode 700). Instructors are hub admins and own the course
# folder; as admins they may also open any student's server through the hub (JupyterHub's admin role).
INSTRUCTORS = _names("LMPOLICY_HUB_INSTRUCTORS", "instructor")
STUDENTS = _names("LMPOLICY_HUB_STUDENTS", "")
c.Authenticator.allowed_users = INSTRUCTORS | STUDENTS
c.Authenticator.admin_users = INSTRUCTORS

# The course folder of an instructor (nbgrader_config.py, source/, release/, the gradebook): inside their
# home, because formgrader serves the course only from below the server's root folder (the home).
COURSE_FOLDER = os.environ.get("LMPOLICY_COURSE_FOLDER", "lm-policy")  # relative to the instructor's home

# --- how they log in ---------------------------------------------------------------------------
# A real hub: the system's passwords (PAM, JupyterHub's default), or your institution's OAuth/LDAP
# authenticator. The tests have no passwords for their throw-away accounts: they set the two shared
# passwords of JupyterHub's SharedPasswordAuthenticator (never use it for a class).
# From the LMS (LTI 1.3), LMPOLICY_HUB_AUTHENTICATOR=lti13: the LMS's user is the course student its LIS
# person_sourcedid maps to in the grade export's mapping file (deploy/lti.py; docs/deployment.md,
# "Launch from the LMS (LTI 1.3)"), the platform's issuer, client id and endpoints as the LMS registers the tool.
if os.environ.get("LMPOLICY_HUB_AUTHENTICATOR") == "lti13":
    sys.path.insert(0, str(DEPLOY))
    from lti import CourseLTI13Authenticator, students_by_sourcedid  # noqa: E402

    c.JupyterHub.authenticator_class = CourseLTI13Authenticator
    c.CourseLTI13Authenticator.lms = os.environ.get("LMPOLICY_HUB_LTI_LMS", "canvas")
    c.CourseLTI13Authenticator.issuer = os.environ["LMPOLICY_HUB_LTI_ISSUER"]
    c.CourseLTI13Authenticator.client_id = _names("LMPOLICY_HUB_LTI_CLIENT_ID", "")
    c.CourseLTI13Authenticator.authorize_url = os.environ["LMPOLICY_HUB_LTI_AUTHORIZE_URL"]
    c.CourseLTI13Authenticator.jwks_endpoint = os.environ["LMPOLICY_HUB_LTI_JWKS_URL"]
    c.CourseLTI13Authenticator.mapping_files = sorted(_names("LMPOLICY_HUB_LTI_MAPPING", ""))
    # a mapping file that cannot be used stops the hub here, with the file and row, not at the first launch
    students_by_sourcedid(c.CourseLTI13Authenticator.mapping_files, c.CourseLTI13Authenticator.lms)
elif os.environ.get("LMPOLICY_HUB_TEST_PASSWORD"):
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = os.environ["LMPOLICY_HUB_TEST_PASSWORD"]
    c.SharedPasswordAuthenticator.admin_password = os.environ["LMPOLICY_HUB_TEST_ADMIN_PASSWORD"]
else:
    c.JupyterHub.authenticator_class = "pam"

# --- where the hub listens and keeps its state ---------------------------------------------------
# Put HTTPS in front of it (a reverse proxy, or c.JupyterHub.ssl_cert / ssl_key) before students log in.
c.JupyterHub.bind_url = os.environ.get("LMPOLICY_HUB_BIND_URL", "http://:8000")
if os.environ.get("LMPOLICY_HUB_INTERNAL_URL"):  # the hub's own API, which the proxy and servers call
    c.JupyterHub.hub_bind_url = os.environ["LMPOLICY_HUB_INTERNAL_URL"]
if os.environ.get("LMPOLICY_HUB_PROXY_API_URL"):  # configurable-http-proxy's API
    c.ConfigurableHTTPProxy.api_url = os.environ["LMPOLICY_HUB_PROXY_API_URL"]
# Users, their servers and tokens live in this SQLite file: a restarted hub finds them all again.
STATE = Path(os.environ.get("LMPOLICY_HUB_STATE_DIR", "/srv/jupyterhub"))
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
# Restarting the hub (an upgrade, a changed config) must not stop the students' servers and lose the
# work in their kernels: the servers keep running and the restarted hub takes them up again.
c.JupyterHub.cleanup_servers = False

# --- each user's server --------------------------------------------------------------------------
# LocalProcessSpawner (the server runs as the user's own Unix account) whose starts wait in line: a class
# that logs in at once is queued, a few servers loading at a time, instead of twenty starting together,
# each at a twentieth of the machine, and being killed by the hub at http_timeout (deploy/start_queue.py).
sys.path.insert(0, str(DEPLOY))
from start_queue import QueuedLocalProcessSpawner  # noqa: E402

c.JupyterHub.spawner_class = QueuedLocalProcessSpawner
# servers loading at once: two per core by default (QueuedLocalProcessSpawner.start_slots, measured in docs/deployment.md)
if os.environ.get("LMPOLICY_HUB_START_SLOTS"):
    c.QueuedLocalProcessSpawner.start_slots = int(os.environ["LMPOLICY_HUB_START_SLOTS"])
# jupyterhub-singleuser without the two pieces of its start no user needs (deploy/singleuser/start.py);
# LMPOLICY_HUB_STOCK_SINGLEUSER=1 starts the stock one (bench/bench_hub.py compares the two)
if os.environ.get("LMPOLICY_HUB_STOCK_SINGLEUSER") == "1":
    c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
else:
    c.Spawner.cmd = [str(VENV_BIN / "python"), str(DEPLOY / "singleuser" / "start.py")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"  # JupyterLab's root and nbgrader's assignment folder: the home
# From its launch, a server has http_timeout to answer (JupyterHub's default, 30 s, is less than a
# JupyterLab needs on a loaded 2-core machine); it loads beside at most start_slots - 1 others.
c.Spawner.http_timeout = 120
# start_timeout covers the wait in line too: a class of 60 at ~4 CPU-seconds a start on 2 cores waits 2 minutes
c.Spawner.start_timeout = 600
# starts pending at once (queued ones count): beyond it the hub answers "Too many users trying to log in
# right now" (429, retry in 30-60 s). The queue makes a limit for the machine's sake unneeded; this one
# bounds the line to what start_timeout lets it serve.
c.JupyterHub.concurrent_spawn_limit = 100
# A start request answers at once ("pending") instead of holding the student 10 s before the spawn page,
# which shows the server's progress: their place in line while they wait, then that it is starting.
c.JupyterHub.tornado_settings = {"slow_spawn_timeout": 0}


def _role(spawner) -> str:
    return "instructor" if spawner.user.name in INSTRUCTORS else "student"


c.Spawner.environment = {
    # the course's venv first: nbgrader's alembic, `jupyter`, `nbgrader` and `python` in terminals
    "PATH": f"{VENV_BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
    # the role's Jupyter config (server extensions, lab plugins, nbgrader) on top of what is installed
    "JUPYTER_CONFIG_PATH": lambda spawner: str(DEPLOY / "singleuser" / _role(spawner)),
    # the shared exchange every user's nbgrader uses (made by the admin, see the guide)
    "LMPOLICY_EXCHANGE": os.environ.get("LMPOLICY_EXCHANGE", "/srv/nbgrader/exchange"),
    "LMPOLICY_COURSE_FOLDER": COURSE_FOLDER,
    # "off" when the course grades everyone on the chapter's numbers (c.Variants.enabled = False), so that the
    # students see those too; otherwise each student's numbers are drawn from their user name
    "LMPOLICY_VARIANTS": os.environ.get("LMPOLICY_VARIANTS", ""),
}
# the gradebook: a PostgreSQL URL for several graders; unset, the course's SQLite file. Only instructors' servers
# get it: the URL holds the database password, and a student's nbgrader never opens the gradebook.
if os.environ.get("LMPOLICY_GRADEBOOK_URL"):
    GRADEBOOK_URL = os.environ["LMPOLICY_GRADEBOOK_URL"]
    c.Spawner.environment["LMPOLICY_GRADEBOOK_URL"] = lambda spawner: GRADEBOOK_URL if _role(spawner) == "instructor" else ""
