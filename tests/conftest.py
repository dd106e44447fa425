"""Shared test set-up: Jupyter and matplotlib never write into a home directory."""
import os
import tempfile
from pathlib import Path

import pytest

from tests.longest_first import put_longest_first

pytest_plugins = ["tests.longest_first"]
ROOT = Path(__file__).resolve().parents[1]
_SCRATCH = Path(tempfile.mkdtemp(prefix="lmpolicy-test-home-"))
for _var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
    os.environ[_var] = str(_SCRATCH / _var.lower())
    Path(os.environ[_var]).mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MPLBACKEND", "Agg")
# `make test` runs two pytest workers on two cores: torch's default of one thread per core
# oversubscribes them (a 3 ms TinyLM forward pass took 100 ms). One thread per worker and subprocess.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("LMPOLICY_PROGRESS_FILE", str(_SCRATCH / "progress.json"))
# nbgrader runs `alembic` as a subprocess: the interpreter's bin/ must be on PATH.
_BIN = str(Path(os.sys.executable).parent)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Make `--dist loadgroup` honour @pytest.mark.xdist_group again, then put the longest work first.

    pytest-xdist 3.8 tags grouped tests by writing ``item._nodeid = "<id>@<group>"``, but pytest 9
    keeps the node id in ``item._id``, so the tag is lost and grouped tests are spread over both
    workers (each then starts its own JupyterLab server or grading class). Copy the tag across.
    """
    from _pytest.nodes import coerce_node_id

    for item in items:
        tagged = item.__dict__.get("_nodeid")
        if tagged and tagged != item.nodeid:
            item._id = coerce_node_id(tagged)
    put_longest_first(items)


def pytest_terminal_summary(terminalreporter):
    """Say whether the sandbox's control groups could be made here (their tests skip where not)."""
    from lmpolicy_grader.isolation.cgroup import cgroup_problem
    problem = cgroup_problem()
    terminalreporter.write_line("sandbox control groups: " + ("made and tested" if problem is None else f"not here ({problem})"))
