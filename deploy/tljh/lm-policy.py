"""The course `lm-policy` on The Littlest JupyterHub (TLJH 2): the parts TLJH's own configuration does not set.

Copy to /opt/tljh/config/jupyterhub_config.d/lm-policy.py and run `sudo tljh-config reload hub`;
docs/deployment.md ("The Littlest JupyterHub") gives the steps around it. TLJH keeps its authenticator,
its SystemdSpawner (every hub user `<name>` runs as the Unix account `jupyter-<name>`), its proxy and
its users' environment /opt/tljh/user; this file adds:

- a grader account, GRADER, that owns the course folder and runs formgrader, that nobody can log in as,
  and a role that lets the instructors open, start and stop its server (JupyterHub's "collaboration
  account" pattern);
- for that account only: the grader's own Python environment (lmpolicy_grader, which students must not
  be able to read), the instructor's Jupyter configuration (formgrader, Create Assignment) and the
  gradebook URL;
- for everyone else: the student's Jupyter configuration (Assignment List and Validate, no formgrader);
- for every server: where the shared exchange is.
"""
from pathlib import Path

from tornado import web

c = get_config()  # noqa: F821  (provided by JupyterHub when it loads this file)

# --- set these ---------------------------------------------------------------------------------
GRADER = "grader_lm_policy"            # a hub user nobody logs in as; Unix account jupyter-grader_lm_policy
INSTRUCTORS = ["instructor1"]          # hub user names of the instructors and TAs
GRADER_ENV = "/opt/lm-policy-grader"   # conda env with the whole course (made by the guide's step 2)
ROLE_CONFIG = "/etc/lm-policy/singleuser"      # a copy of the repository's deploy/singleuser/
EXCHANGE = "/srv/nbgrader/exchange"            # nbgrader's shared exchange folder
GRADEBOOK_URL_FILE = "/etc/lm-policy/gradebook-url"  # root-only file holding a PostgreSQL URL (optional)

# --- who grades --------------------------------------------------------------------------------
# load_groups creates the grader's hub user if it does not exist yet; load_roles is extended, not
# replaced, so TLJH's own services keep their permissions.
c.JupyterHub.load_groups.update({
    "lm-policy-graders": {"users": [GRADER]},
    "lm-policy-instructors": {"users": INSTRUCTORS},
})
c.JupyterHub.load_roles.append({
    "name": "lm-policy-grader-access",
    "description": "Open, start and stop the course's grader server",
    "groups": ["lm-policy-instructors"],
    "scopes": [f"access:servers!user={GRADER}", f"admin:servers!user={GRADER}",
               "admin-ui", f"list:users!user={GRADER}"],
})


def _refuse_the_grader_account(authenticator, handler, authentication):
    """Nobody logs in as the grader account (TLJH's default FirstUseAuthenticator would let the first
    comer claim any name): instructors reach its server from their own login, through the role above."""
    if authentication["name"] == GRADER:
        raise web.HTTPError(403, f"{GRADER} is the course's grader account: open its server from your own login")
    return authentication


c.Authenticator.post_auth_hook = _refuse_the_grader_account


def _is_grader(spawner) -> bool:
    return spawner.user.name == GRADER


def _gradebook_url() -> str | None:
    path = Path(GRADEBOOK_URL_FILE)
    return path.read_text().strip() if path.exists() else None


# --- every server ------------------------------------------------------------------------------
c.Spawner.environment.update({
    "LMPOLICY_EXCHANGE": EXCHANGE,
    # the role's Jupyter configuration, read on top of what is installed (server extensions, lab
    # plugins, nbgrader's course id and exchange)
    "JUPYTER_CONFIG_PATH": lambda spawner: f"{ROLE_CONFIG}/{'instructor' if _is_grader(spawner) else 'student'}",
    # the course folder of the grader, relative to its home (deploy/singleuser/instructor/ reads it)
    "LMPOLICY_COURSE_FOLDER": "lm-policy",
})


def _grader_server(spawner):
    """The grader's server runs from the grader's environment and alone knows the gradebook's URL."""
    if not _is_grader(spawner):
        return
    spawner.cmd = [f"{GRADER_ENV}/bin/jupyterhub-singleuser"]
    spawner.extra_paths = [f"{GRADER_ENV}/bin"]  # its terminals find the grader's python, nbgrader, dask
    url = _gradebook_url()
    if url:
        spawner.environment = {**spawner.environment, "LMPOLICY_GRADEBOOK_URL": url}


c.Spawner.pre_spawn_hook = _grader_server

# --- a class that logs in at once ----------------------------------------------------------------
# TLJH leaves JupyterHub's http_timeout at 30 s: a server that has not answered 30 s after its launch is
# killed, and twenty JupyterLabs starting together on two cores need about a minute (docs/deployment.md,
# "How many students a hub holds"). Two minutes, and start requests answered at once with the spawn page.
c.Spawner.http_timeout = 120
c.JupyterHub.tornado_settings = {**c.JupyterHub.get("tornado_settings", {}), "slow_spawn_timeout": 0}
