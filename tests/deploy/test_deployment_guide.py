"""docs/deployment.md and the configuration it hands out (deploy/tljh/, deploy/z2jh/) stay true to the repository.

Nothing here starts TLJH or Kubernetes. What is checked is what can go stale without anyone noticing: every
file and test the guide names exists, every snippet parses, every command and flag it gives is one the tool
accepts, every LMPOLICY_* variable it tells an admin to set is read by the course's code, the JupyterHub roles
are valid for the JupyterHub installed here, and the TLJH and z2jh hub configurations, run with JupyterHub's
own config loader or on stand-in spawners, give the course folder, the instructor's tools and the gradebook's
URL to the grader account alone.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deployment.md"
TLJH = ROOT / "deploy" / "tljh"
Z2JH = ROOT / "deploy" / "z2jh"
HANDED_OUT = [GUIDE, *sorted(TLJH.iterdir()), *sorted(Z2JH.iterdir())]
GRADER = "grader_lm_policy"
_TOP_LEVEL = ("deploy", "lib", "tests", "docs", "bench", "source", "release", "notebooks", "jupyter-config")
_REPO_PATH = re.compile(r"(?<![\w/.~-])((?:%s)/[\w./-]*[\w/])" % "|".join(map(re.escape, _TOP_LEVEL)))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _fenced_blocks(markdown: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block, list-item indentation removed."""
    pattern = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
    return [(lang, textwrap.dedent(code)) for _, lang, code in pattern.findall(markdown)]


def _code(markdown: str) -> list[str]:
    """Every piece of code in the guide: inline spans and fenced blocks."""
    without_blocks = re.sub(r"^ *```.*?^ *```", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return re.findall(r"`([^`\n]+)`", without_blocks) + [code for _, code in _fenced_blocks(markdown)]


def _values() -> dict:
    return yaml.safe_load(_text(Z2JH / "values.yaml"))


def _grading_documents() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(_text(Z2JH / "grading.yaml")) if doc}


# --- the guide's references --------------------------------------------------------------------

def test_every_repository_path_the_guide_and_its_files_name_exists():
    named = {match for path in HANDED_OUT for match in _REPO_PATH.findall(_text(path))}
    assert "deploy/z2jh/values.yaml" in named, "the path pattern found nothing: is the guide still there?"
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"named but not in the repository: {missing}"


def test_every_test_the_guide_cites_as_proof_exists_and_holds_tests():
    cited = sorted(set(re.findall(r"tests/[\w/]+\.py", _text(GUIDE))))
    assert "tests/deploy/test_hub.py" in cited
    for path in cited:
        assert re.search(r"^def test_", _text(ROOT / path), re.MULTILINE), f"{path} holds no test"
    assert "being built" not in _text(GUIDE), "the proof table still says a part is being built"


def test_python_snippets_parse():
    snippets = [code for lang, code in _fenced_blocks(_text(GUIDE)) if lang == "python"]
    snippets += re.findall(r'python -c "([^"]+)"', _text(GUIDE))
    snippets += [_values()["hub"]["extraConfig"]["lm-policy"], _text(TLJH / "lm-policy.py")]
    assert len(snippets) >= 4
    for snippet in snippets:
        ast.parse(snippet)


def test_shell_snippets_parse():
    blocks = [code for lang, code in _fenced_blocks(_text(GUIDE)) if lang == "bash"]
    assert blocks
    for code in blocks:
        result = subprocess.run(["bash", "-n"], input=code, text=True, capture_output=True)
        assert result.returncode == 0, f"{result.stderr}\n{code}"


def test_the_kubernetes_files_parse_as_yaml():
    for path in sorted(Z2JH.glob("*.yaml")):
        documents = [doc for doc in yaml.safe_load_all(_text(path)) if doc]
        assert documents, path


def test_every_lmpolicy_variable_the_guide_sets_is_read_by_the_course():
    mentioned = {name for path in HANDED_OUT for name in re.findall(r"LMPOLICY_[A-Z_]+[A-Z]", _text(path))}
    readers = [ROOT / "nbgrader_config.py", ROOT / "deploy" / "jupyterhub_config.py",
               *(ROOT / "lib").rglob("*.py"), *(ROOT / "deploy" / "singleuser").rglob("*.py")]
    read = set()
    for reader in readers:
        source = _text(reader)
        if "environ" in source or "getenv" in source:
            read |= set(re.findall(r"""["'](LMPOLICY_[A-Z_]+)["']""", source))
    assert {"LMPOLICY_EXCHANGE", "LMPOLICY_GRADEBOOK_URL"} <= mentioned
    assert mentioned <= read, f"set by the guide, read by nothing: {sorted(mentioned - read)}"


@pytest.mark.slow  # loads the course's nbgrader configuration (nbgrader, torch) in a fresh interpreter
def test_the_course_configuration_takes_the_exchange_and_gradebook_from_the_environment(tmp_path):
    url = "postgresql+psycopg2://lm_policy:secret@db.example.org:5432/lm_policy"
    probe = ("from pathlib import Path; from lmpolicy_grader.class_grading.grading import load_config; "
             f"c = load_config(Path({str(ROOT)!r})); print(c.Exchange.root); print(c.CourseDirectory.db_url)")
    env = {**os.environ, "LMPOLICY_EXCHANGE": str(tmp_path), "LMPOLICY_GRADEBOOK_URL": url}
    out = subprocess.run([sys.executable, "-c", probe], env=env, text=True, capture_output=True, check=True)
    assert out.stdout.split() == [str(tmp_path), url]


# --- the commands it gives ---------------------------------------------------------------------

@pytest.mark.slow  # imports the grader (nbgrader, distributed)
def test_every_lmpolicy_grader_command_in_the_guide_parses():
    from lmpolicy_grader.__main__ import parse

    code = "\n".join(_code(_text(GUIDE))) + _text(Z2JH / "grading.yaml")
    commands = {line.strip() for line in re.findall(r"python -m lmpolicy_grader ([^`\n;&|]*)", code)}
    assert any(command.startswith("grade --scheduler tcp://") for command in commands), commands
    for command in sorted(commands):
        parse(shlex.split(command))  # tyro exits on an unknown command or flag


def test_every_nbgrader_command_in_the_guide_exists():
    from nbgrader.apps import NbGraderApp

    used = {name for code in _code(_text(GUIDE)) for name in re.findall(r"\bnbgrader ([a-z_]+)", code)}
    assert {"release_assignment", "collect", "generate_feedback", "release_feedback"} <= used
    assert used <= set(NbGraderApp.subcommands), sorted(used - set(NbGraderApp.subcommands))


@lru_cache(maxsize=None)
def _dask_options(subcommand: str) -> set[str]:
    dask = Path(sys.executable).with_name("dask")
    help_text = subprocess.run([str(dask), subcommand, "--help"], text=True, capture_output=True, check=True).stdout
    return set(re.findall(r"--[a-z][a-z-]+", help_text))


def test_every_dask_command_and_flag_the_guide_and_the_cluster_use_exists():
    lines = [line for code in _code(_text(GUIDE)) for line in code.splitlines()]
    worker = _grading_documents()["DaskCluster"]["spec"]["worker"]["spec"]["containers"][0]["args"]
    lines.append(" ".join(worker))
    uses = [re.search(r"\bdask (worker|scheduler|ssh)\b(.*)", line) for line in lines]
    uses = [use for use in uses if use]
    assert {use.group(1) for use in uses} == {"worker", "scheduler", "ssh"}
    for use in uses:
        flags = set(re.findall(r"(--[a-z][a-z-]+)", use.group(2)))
        assert flags <= _dask_options(use.group(1)), (use.group(0), flags - _dask_options(use.group(1)))
    assert {"--nthreads", "--memory-limit"} <= set(worker)


def test_the_sandbox_check_the_guide_gives_runs_and_answers():
    (snippet,) = re.findall(r'python -c "([^"]*sandbox_problem[^"]*)"', _text(GUIDE))
    out = subprocess.run([sys.executable, "-c", snippet], text=True, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), "the check printed nothing"


# --- the role configurations ----------------------------------------------------------------------

# the guide's names of nbgrader's parts -> (its server extension, its lab plugin)
_NBGRADER_PARTS = {
    "Assignment List": ("nbgrader.server_extensions.assignment_list", "@jupyter/nbgrader:assignment-list"),
    "Validate": ("nbgrader.server_extensions.validate_assignment", "@jupyter/nbgrader:validate-assignment"),
    "Formgrader": ("nbgrader.server_extensions.formgrader", "@jupyter/nbgrader:formgrader"),
    "Create Assignment": (None, "@jupyter/nbgrader:create-assignment"),
    "Course List": ("nbgrader.server_extensions.course_list", "@jupyter/nbgrader:course-list"),
}


def _extension_table() -> dict[str, tuple[str, str]]:
    """The guide's table of nbgrader parts per role: part -> (student, grader), e.g. ("on", "off")."""
    rows = {}
    for line in _text(GUIDE).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        part = next((name for name in _NBGRADER_PARTS if cells[0].startswith(name)), None)
        if part and len(cells) == 3:
            rows[part] = (cells[1].split()[0], cells[2].split()[0])
    return rows


def _what_a_role_gets(monkeypatch, role: str) -> tuple[dict, set]:
    """The server extensions Jupyter Server would load and the lab plugins JupyterLab would disable, for a
    server started with the role's folder on JUPYTER_CONFIG_PATH (the way both hubs start them)."""
    import logging

    from jupyter_core.paths import jupyter_path
    from jupyter_server.serverapp import ServerApp
    from jupyterlab_server.config import get_page_config

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(ROOT / "deploy" / "singleuser" / role))
    server = ServerApp()
    server.load_config_file()
    server.find_server_extensions()
    page = get_page_config(jupyter_path("labextensions"), logger=logging.getLogger("page-config"))
    return dict(server.jpserver_extensions), set(page.get("disabledExtensions", []))


def test_each_role_folder_shows_the_nbgrader_parts_the_guide_says(monkeypatch):
    table = _extension_table()
    assert set(table) == set(_NBGRADER_PARTS), table
    for column, role in enumerate(("student", "instructor")):
        server, disabled_plugins = _what_a_role_gets(monkeypatch, role)
        for part, (extension, plugin) in _NBGRADER_PARTS.items():
            said = table[part][column]
            if said == "as":  # "as installed": nbgrader enables every part when it is installed
                said = "on"
            on = plugin not in disabled_plugins and (extension is None or server.get(extension, False))
            assert on == (said == "on"), f"{role}: the guide says {part} is {said}"


# --- the hub configurations ----------------------------------------------------------------------

def _valid_roles(roles_: list[dict]) -> None:
    """JupyterHub's own validation of role names and scopes, on a throw-away database."""
    from jupyterhub import orm, roles

    db = orm.new_session_factory("sqlite:///:memory:")()
    for role in roles_:
        roles.create_role(db, {key: role[key] for key in ("name", "description", "scopes") if key in role})


def _tljh_spawner(name: str):
    from jupyterhub.app import JupyterHub
    from jupyterhub.spawner import LocalProcessSpawner

    hub = JupyterHub()
    hub.load_config_file(str(TLJH / "lm-policy.py"))
    return hub, LocalProcessSpawner(config=hub.config, user=SimpleNamespace(name=name))


def _environment(spawner) -> dict:
    return {key: value(spawner) if callable(value) else value for key, value in spawner.environment.items()}


def test_tljh_config_lets_instructors_in_and_gives_the_grader_alone_its_tools_and_the_gradebook(tmp_path):
    hub, grader = _tljh_spawner(GRADER)
    _valid_roles(hub.load_roles)
    (role,) = [role for role in hub.load_roles if role["name"] == "lm-policy-grader-access"]
    assert f"access:servers!user={GRADER}" in role["scopes"]
    assert hub.load_groups["lm-policy-graders"]["users"] == [GRADER]
    assert role["groups"] == ["lm-policy-instructors"] and "lm-policy-instructors" in hub.load_groups

    url_file = tmp_path / "gradebook-url"
    url_file.write_text("postgresql+psycopg2://lm_policy:secret@localhost:5432/lm_policy\n")
    grader.pre_spawn_hook.__globals__["GRADEBOOK_URL_FILE"] = str(url_file)
    grader.pre_spawn_hook(grader)
    _, student = _tljh_spawner("alice")
    student.pre_spawn_hook(student)

    grader_env, student_env = _environment(grader), _environment(student)
    assert grader_env["LMPOLICY_GRADEBOOK_URL"] == url_file.read_text().strip()
    assert "LMPOLICY_GRADEBOOK_URL" not in student_env
    assert grader.cmd[0].startswith("/opt/lm-policy-grader/") and not student.cmd[0].startswith("/opt/lm-policy-grader/")
    assert grader_env["JUPYTER_CONFIG_PATH"].endswith("/instructor")
    assert student_env["JUPYTER_CONFIG_PATH"].endswith("/student")
    for env in (grader_env, student_env):
        assert (ROOT / "deploy" / "singleuser" / Path(env["JUPYTER_CONFIG_PATH"]).name).is_dir()
        assert env["LMPOLICY_EXCHANGE"] == "/srv/nbgrader/exchange"


def _logs_in(config, name: str) -> bool:
    """Whether JupyterHub's own login pipeline (here behind its DummyAuthenticator) lets `name` in."""
    import asyncio

    from jupyterhub.auth import DummyAuthenticator
    from tornado import web

    authenticator = DummyAuthenticator(config=config, allow_all=True)
    login = authenticator.get_authenticated_user(None, {"username": name, "password": "x"})
    try:
        # a loop of its own in a thread of its own: a browser test earlier in this worker may have left
        # Playwright's loop running in this one
        with ThreadPoolExecutor(1) as thread:
            return thread.submit(asyncio.run, login).result() is not None
    except web.HTTPError as refused:
        assert refused.status_code == 403 and GRADER in refused.log_message
        return False


def test_nobody_logs_in_as_the_grader_account_on_either_hub():
    tljh, _ = _tljh_spawner("alice")
    z2jh = _z2jh_hook()["c"]
    for config in (tljh.config, z2jh):
        assert not _logs_in(config, GRADER)
        assert _logs_in(config, "alice")


def _z2jh_hook():
    from traitlets.config import Config

    namespace = {"c": Config()}
    exec(_values()["hub"]["extraConfig"]["lm-policy"], namespace)  # what the chart does with hub.extraConfig
    return namespace


def _stand_in_pod(name: str, user_id: int):
    return SimpleNamespace(user=SimpleNamespace(name=name, id=user_id), image="student", args=[], extra_labels={},
                           environment={}, volumes=[], volume_mounts=[], container_security_context=None)


def test_z2jh_values_give_the_grader_alone_the_course_the_gradebook_and_the_sandbox_rights():
    values, config = _values(), _z2jh_hook()
    _valid_roles([{"name": name, **role} for name, role in values["hub"]["loadRoles"].items()])
    hook, uid = config["c"].KubeSpawner.pre_spawn_hook, config["c"].KubeSpawner.uid

    grader, alice, bob = _stand_in_pod(GRADER, 1), _stand_in_pod("alice", 2), _stand_in_pod("bob", 3)
    for pod in (grader, alice, bob, grader):  # the hub keeps a spawner from one start to the next
        hook(pod)
    assert [volume["name"] for volume in grader.volumes] == ["course"] and grader.args == ["--allow-root"]
    assert grader.image == config["GRADER_IMAGE"] and alice.image == "student"
    assert grader.environment["LMPOLICY_GRADEBOOK_URL"] == {"valueFrom": config["GRADEBOOK_SECRET"]}
    assert grader.container_security_context["capabilities"]["add"] == ["SYS_ADMIN"]
    assert alice.environment == {} and alice.volumes == [] and alice.container_security_context is None
    assert len({uid(alice), uid(bob), uid(grader)}) == 3 and uid(grader) == 0 and uid(alice) >= 10000

    student_env = values["singleuser"]["extraEnv"]
    assert not any("GRADEBOOK" in key for key in student_env)
    (exchange_mount,) = values["singleuser"]["storage"]["extraVolumeMounts"]
    assert exchange_mount["mountPath"] == student_env["LMPOLICY_EXCHANGE"]
    dockerfile = _text(Z2JH / "Dockerfile")
    assert "COPY deploy/singleuser /etc/lm-policy/singleuser" in dockerfile
    for path in (student_env["JUPYTER_CONFIG_PATH"], grader.environment["JUPYTER_CONFIG_PATH"]):
        assert path.startswith("/etc/lm-policy/singleuser/")
        assert (ROOT / "deploy" / "singleuser" / Path(path).name).is_dir()


def test_z2jh_grader_workers_and_storage_agree_on_volumes_paths_secret_and_retries():
    from lmpolicy_grader.class_grading.cluster import ALLOWED_FAILURES

    config, documents = _z2jh_hook(), _grading_documents()
    claims = {doc["metadata"]["name"] for doc in yaml.safe_load_all(_text(Z2JH / "storage.yaml")) if doc}
    grader = _stand_in_pod(GRADER, 1)
    config["c"].KubeSpawner.pre_spawn_hook(grader)
    (course,) = [volume for volume in grader.volumes if volume["name"] == "course"]
    (course_mount,) = [mount for mount in grader.volume_mounts if mount["name"] == "course"]

    worker_pod = documents["DaskCluster"]["spec"]["worker"]["spec"]
    (worker,) = worker_pod["containers"]
    (worker_course,) = worker_pod["volumes"]
    assert worker_course["persistentVolumeClaim"]["claimName"] == course["persistentVolumeClaim"]["claimName"]
    assert course["persistentVolumeClaim"]["claimName"] in claims
    assert worker["volumeMounts"][0]["mountPath"] == course_mount["mountPath"] == config["COURSE_MOUNT"]
    # the instructor's nbgrader configuration looks for the course at $HOME/$LMPOLICY_COURSE_FOLDER
    (home,) = re.findall(r"^ENV .*\bHOME=(\S+)", _text(Z2JH / "Dockerfile"), re.MULTILINE)
    assert Path(home) / grader.environment["LMPOLICY_COURSE_FOLDER"] == Path(config["COURSE_MOUNT"])
    exchange_claim = _values()["singleuser"]["storage"]["extraVolumes"][0]["persistentVolumeClaim"]["claimName"]
    assert exchange_claim in claims

    secret = documents["Secret"]
    (worker_url,) = [env for env in worker["env"] if env["name"] == "LMPOLICY_GRADEBOOK_URL"]
    assert worker_url["valueFrom"] == config["GRADEBOOK_SECRET"]
    ref = config["GRADEBOOK_SECRET"]["secretKeyRef"]
    assert secret["metadata"]["name"] == ref["name"] and ref["key"] in secret["stringData"]
    assert secret["stringData"][ref["key"]].startswith("postgresql+psycopg2://")
    # the same rights as the grader's pod; AppArmor as the annotation the DaskCluster schema lets through
    rights = dict(config["GRADING_SECURITY_CONTEXT"])
    assert rights.pop("appArmorProfile") == {"type": "Unconfined"}
    assert worker["securityContext"] == rights
    annotations = documents["DaskCluster"]["spec"]["worker"]["metadata"]["annotations"]
    assert annotations[f"container.apparmor.security.beta.kubernetes.io/{worker['name']}"] == "unconfined"

    (scheduler,) = documents["DaskCluster"]["spec"]["scheduler"]["spec"]["containers"]
    retries = {env["name"]: env["value"] for env in scheduler["env"]}
    assert retries["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] == str(ALLOWED_FAILURES)
    policy = documents["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"]
    assert policy.items() <= grader.extra_labels.items()


def test_the_images_leave_the_grader_out_of_the_students_image():
    dockerfile = _text(Z2JH / "Dockerfile")
    student_stage = dockerfile.split("AS student", 1)[1].split("FROM ", 1)[0]
    assert "lib/lmpolicy " in student_stage and "lmpolicy_grader" not in student_stage and "COPY . " not in student_stage
    requirements = _text(ROOT / "requirements.txt").splitlines()
    # torch: the line the Dockerfile and the TLJH step install from PyTorch's CPU index instead
    assert any(line.startswith("torch==") for line in requirements)
    # JupyterHub: the image and TLJH's environment take the hub's own version, never the tested pin of
    # requirements-hub.txt (the student's set has none; the Dockerfile would take one out)
    assert any(line.startswith("jupyterhub==") for line in _text(ROOT / "requirements-hub.txt").splitlines())
    assert not any(line.startswith("jupyterhub==") for line in requirements) or "'^jupyterhub=='" in dockerfile
    assert json.loads(_text(ROOT / "deploy" / "singleuser" / "student" / "jupyter_server_config.json"))


def test_the_grader_image_installs_the_graders_pins():
    """The grader's image runs Dask's scheduler and workers and sanitizes every view of a submission (nh3):
    it installs requirements-grader.txt, not the student's set alone."""
    dockerfile = _text(Z2JH / "Dockerfile")
    grader_stage = dockerfile.split("AS grader", 1)[1]
    assert "-r /tmp/course/requirements-grader.txt" in grader_stage
    pins = {line.split("==")[0] for line in _text(ROOT / "requirements-grader.txt").splitlines()
            if "==" in line and not line.startswith("#")}
    assert {"dask", "distributed", "nh3"} <= pins
