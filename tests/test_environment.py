"""The course's environments: one file of pins per set, the student's set alone for `make lab`.

requirements.txt is the student's set (JupyterLab, nbgrader's Validate, the notebooks, `lmpolicy`);
requirements-grader.txt, -hub.txt and -test.txt hold the rest, pyproject.toml reads all four as the
package's dependencies and extras, and environment.yml (Binder) installs the student's set.
"""
import ast
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata

import nbformat
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .conftest import ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)$")
SET_FILES = {"student": "requirements.txt", "grader": "requirements-grader.txt",
             "hub": "requirements-hub.txt", "test": "requirements-test.txt"}
# what a student never runs: the grader's cluster, the hub and its gradebook driver, the test tools
NOT_FOR_STUDENTS = {"dask", "distributed", "jupyterhub", "psycopg2-binary", "pytest", "pytest-xdist", "playwright"}


def _pins(set_name: str) -> dict[str, str]:
    path = ROOT / SET_FILES[set_name]
    lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
    pins = {}
    for line in filter(None, lines):
        match = PIN.match(line)
        assert match, f"{path.name}: {line!r} is not pinned as name==version"
        pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def _installed_closure(names) -> set[str]:
    """The distributions pip installs for `names`, read from this (complete) environment's metadata; a
    requirement with extras (nbconvert's bleach[css]) brings the extras' requirements too."""
    closure, done, todo = set(), set(), [(canonicalize_name(name), "") for name in names]
    while todo:
        name, extra = todo.pop()
        if (name, extra) in done:
            continue
        done.add((name, extra))
        closure.add(name)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                required = canonicalize_name(requirement.name)
                todo += [(required, "")] + [(required, wanted) for wanted in requirement.extras]
    return closure


def test_environment_yml_installs_the_students_set_and_pins_nothing_itself():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(item["pip"] for item in environment["dependencies"] if isinstance(item, dict) and "pip" in item)
    assert "-r requirements.txt" in pip and "-e ." in pip, pip
    assert not any(name in line for line in pip for name in ("[", "requirements-")), pip  # no extra set
    assert [line for line in pip if "==" in line] == []  # a pin here would be a second list to keep in line
    conda = [item for item in environment["dependencies"] if isinstance(item, str)]
    assert set(conda) == {"python=3.11", "pip"}, conda


def test_each_package_is_pinned_in_one_file_and_pyproject_reads_the_files_as_dependencies_and_extras():
    seen = {}
    for set_name in SET_FILES:
        for name in _pins(set_name):
            assert name not in seen, f"{name} is pinned in {SET_FILES[seen[name]]} and {SET_FILES[set_name]}"
            seen[name] = set_name
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "dependencies" not in project["project"] and "optional-dependencies" not in project["project"]
    dynamic = project["tool"]["setuptools"]["dynamic"]
    assert dynamic["dependencies"] == {"file": [SET_FILES["student"]]}
    assert {extra: spec["file"] for extra, spec in dynamic["optional-dependencies"].items()} == \
        {set_name: [path] for set_name, path in SET_FILES.items() if set_name != "student"}


def test_torch_is_pinned_to_the_local_cpu_wheel():
    # any other torch requirement pulls a multi-GB CUDA build on the course machines
    assert _pins("student")["torch"] == "2.13.0"


def test_the_students_environment_holds_none_of_the_graders_the_hubs_or_the_tests_packages():
    student = _installed_closure(_pins("student"))
    assert {"jupyterlab", "notebook", "nbgrader", "torch", "ipywidgets", "matplotlib", "tqdm"} <= student
    assert student & NOT_FOR_STUDENTS == set()
    everything = _installed_closure(name for set_name in SET_FILES for name in _pins(set_name))
    assert NOT_FOR_STUDENTS <= everything  # the other sets do install them


def _make_dry_run(target: str, *variables: str) -> str:
    """What `make <target>` runs on a clean clone (-B: as if nothing were installed yet), without running it."""
    result = subprocess.run(["make", "--no-print-directory", "-n", "-B", target, *variables], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    return result.stdout


def test_make_lab_with_a_student_id_installs_as_without_and_starts_the_lab_with_that_id():
    with_id, without = _make_dry_run("lab", "STUDENT=alice"), _make_dry_run("lab")
    assert 'LMPOLICY_STUDENT_ID="alice"' in with_id and "LMPOLICY_STUDENT_ID" not in without
    assert with_id.replace('LMPOLICY_STUDENT_ID="alice" ', "") == without


@pytest.mark.parametrize("target", ["lab", "install"])
def test_the_students_targets_install_the_students_set_alone_and_never_call_npm(target):
    commands = _make_dry_run(target)
    pip_installs = [line for line in commands.splitlines() if "pip install" in line and " -r " in line]
    assert pip_installs and all(line.endswith("-r requirements.txt") for line in pip_installs), pip_installs
    assert "npm" not in commands and "requirements-" not in commands


def test_make_release_installs_only_the_students_set():
    """nbgrader_config.py imports no grader-only package, so the release needs nbgrader alone."""
    commands = _make_dry_run("release")
    assert "requirements-" not in commands and "npm" not in commands and "generate_assignment" in commands


@pytest.mark.parametrize("target", ["grade", "instructor"])
def test_the_graders_targets_add_the_graders_set_but_neither_npm_nor_the_hubs_or_the_tests(target):
    commands = _make_dry_run(target)
    assert "-r requirements.txt -r requirements-grader.txt" in commands
    assert "npm" not in commands and "requirements-hub.txt" not in commands and "requirements-test.txt" not in commands


def test_make_test_installs_every_set_and_npms_proxy():
    commands = _make_dry_run("test")
    assert all(f"-r {path}" in commands for path in SET_FILES.values())
    assert "npm install" in commands


# Run in a fresh interpreter: Python's path finder no longer finds the distributions outside the student's
# set, nor a module that only they provide, so that importing it fails and probing for it (importlib.util.
# find_spec, importlib.metadata) finds nothing, as in the student's own venv. Then the given code runs.
# Such a module is still found outside site-packages: setuptools puts its vendored copies (jaraco, ...) on
# sys.path, and a student's venv without the separate distribution imports those.
_STUDENT_ONLY = """
import json, re, site, sys
from importlib.machinery import PathFinder
absent_modules, absent_distributions = (set(names) for names in json.loads(sys.argv[1]))
site_packages = set(site.getsitepackages())
class StudentsPathFinder:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in absent_modules and path is None:
            path = [entry for entry in sys.path if entry not in site_packages]
        return PathFinder.find_spec(name, path, target)
    def find_distributions(self, context=None, **kwargs):
        for distribution in PathFinder.find_distributions(context, **kwargs):
            if re.sub(r"[-_.]+", "-", distribution.metadata["Name"]).lower() not in absent_distributions:
                yield distribution
    def invalidate_caches(self):
        PathFinder.invalidate_caches()
sys.meta_path[:] = [StudentsPathFinder() if finder is PathFinder else finder for finder in sys.meta_path]
exec(sys.argv[2])
"""


def _run_as_in_the_students_environment(code: str) -> subprocess.CompletedProcess:
    student = _installed_closure([*_pins("student"), "lmpolicy"])  # the course's package is installed too
    absent_distributions = {canonicalize_name(d.metadata["Name"]) for d in metadata.distributions()} - student
    absent_modules = sorted(module for module, dists in metadata.packages_distributions().items()
                            if not {canonicalize_name(d) for d in dists} & student)
    assert {"distributed", "jupyterhub", "pytest", "playwright"} <= set(absent_modules)  # the blocker blocks
    absent = json.dumps([absent_modules, sorted(absent_distributions)])
    return subprocess.run([sys.executable, "-c", _STUDENT_ONLY, absent, code], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_release_notebooks_imports_need_nothing_beyond_the_students_environment():
    imports = set()
    for path in sorted((ROOT / "release" / "ch11").glob("*.ipynb")) + [ROOT / "notebooks" / "00_start_here.ipynb"]:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:  # an answer cell's placeholder, or IPython magics
                continue
            imports |= {ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))}
    assert any("lmpolicy" in line for line in imports), imports
    result = _run_as_in_the_students_environment("\n".join(sorted(imports)))
    assert result.returncode == 0, result.stderr[-3000:]


# The student's Validate loads nbgrader_config.py (nbgrader's validate handler reads the config in the server's
# folder, the course root); traitlets logs a failing config file and goes on without it, so the error is silent.
def test_the_students_validate_loads_the_course_config_without_the_graders_packages():
    load_config_as_validate_does = (
        "from nbgrader.apps import NbGrader\n"
        "app = NbGrader(raise_config_file_errors=True)\n"
        "app.config_file_paths.append(['.'])\n"
        "app.load_config_file()\n"
        "assert app.config.CourseDirectory.course_id == 'lm-policy', app.config\n")
    result = _run_as_in_the_students_environment(load_config_as_validate_does)
    assert result.returncode == 0, result.stderr[-3000:]


def test_nbformat_imports_without_building_the_iri_grammar():
    # jsonschema >= 4.25 imports rfc3987-syntax when it is installed, and that import builds a Lark parser:
    # about 2 CPU-s in every process that imports nbformat (requirements.txt pins jsonschema below it).
    probe = "import sys, nbformat.validator; print('rfc3987_syntax' in sys.modules, 'lark' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "False"], result.stdout
