"""What running the tests in their own process costs, measured side by side (from the repository root):

    .venv/bin/python bench/bench_trusted_tests.py [--notebooks 01_policy_softmax,03_three_stages,06_kl_estimators]
        [--rounds 3] [--sandbox on|off]

One submission (the reference) of each notebook, graded by ``grading.grade_unit`` in this process
(nbgrader's Autograde with the course's config, feedback off), alternately

(a) with its test cells in the grading kernel (``GradingExecute.tests_in_trusted_process = False``,
    the tamper guard loaded), and
(b) with its test cells in the trusted kernel, which reaches the submission through the channel.

Rounds alternate (a) and (b) so that a machine whose load changes treats both alike; the report is
each notebook's median wall-clock seconds per way, the sum over the notebooks, and the ratio (b) / (a);
then the CPU seconds of this process and of the children it waited for: that counts the trusted
kernels (what the trusted process adds, and what the load of a shared machine does not inflate the
way it inflates wall-clock time) but not the sandboxed grading kernel, whose use bubblewrap's pid
namespace does not hand back.
Everything runs in a temporary copy of the course; the repository is not touched.
"""
from __future__ import annotations

import copy
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Settings:
    notebooks: str = "01_policy_softmax,03_three_stages,06_kl_estimators"
    rounds: int = 3
    sandbox: Literal["on", "off"] = "on"


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (the trusted kernels, not the
    sandboxed one)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def main(settings: Settings) -> None:
    for variable in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        os.environ[variable] = tempfile.mkdtemp(prefix=variable.lower())
    from lmpolicy_grader.__main__ import release
    from lmpolicy_grader.examples import place_examples
    from lmpolicy_grader.grading import grade_unit, worker_config
    from lmpolicy_grader.status import Status

    notebooks = settings.notebooks.split(",")
    root = Path(tempfile.mkdtemp(prefix="bench-trusted-tests-"))
    try:
        (root / "source" / "ch11").mkdir(parents=True)
        for name in notebooks:
            shutil.copy(REPO / "source" / "ch11" / f"{name}.ipynb", root / "source" / "ch11")
        shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
        release(root)
        place_examples(root)
        base = worker_config(str(root), settings.sandbox == "on")
        ways = {}
        for trusted in (False, True):
            ways[trusted] = copy.deepcopy(base)
            ways[trusted].GradingExecute.tests_in_trusted_process = trusted
        grade_unit(root, ways[True], "reference", notebooks[0], feedback=False)  # warm the disk caches
        seconds = {(kind, trusted, name): [] for kind in ("wall", "cpu") for trusted in ways for name in notebooks}
        for round_ in range(settings.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            for name in notebooks:
                for trusted in order:
                    started, cpu = time.perf_counter(), _cpu_seconds()
                    outcome = grade_unit(root, ways[trusted], "reference", name, feedback=False)
                    seconds[("wall", trusted, name)].append(time.perf_counter() - started)
                    seconds[("cpu", trusted, name)].append(_cpu_seconds() - cpu)
                    if outcome.status != Status.GRADED:
                        sys.exit(f"{name} ({'trusted' if trusted else 'in kernel'}) was not graded: {outcome.reason}")
        load = os.getloadavg()[0]
        print(f"one submission, notebooks {', '.join(notebooks)}; {settings.rounds} rounds, sandbox {settings.sandbox}; "
              f"{os.cpu_count()} CPUs, load average {load:.1f} at the end")
        for kind in ("wall", "cpu"):
            label = "wall seconds" if kind == "wall" else "CPU s (no sandbox)"
            print(f"{label:<22} {'tests in kernel':>16} {'trusted process':>16} {'ratio':>7}")
            totals = {False: 0.0, True: 0.0}
            for name in notebooks:
                medians = {trusted: statistics.median(seconds[(kind, trusted, name)]) for trusted in ways}
                for trusted in ways:
                    totals[trusted] += medians[trusted]
                print(f"{name:<22} {medians[False]:>16.2f} {medians[True]:>16.2f} {medians[True] / medians[False]:>7.2f}")
            print(f"{'total':<22} {totals[False]:>16.2f} {totals[True]:>16.2f} {totals[True] / totals[False]:>7.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(tyro.cli(Settings))
