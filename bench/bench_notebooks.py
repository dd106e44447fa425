"""How long do the ch11 notebooks take? Every solution notebook top to bottom, twice: as a student and as the grader.

    python bench/bench_notebooks.py [--only student|grader] [notebook names ...]

Each source notebook of source/ch11 (or the ones named) runs in a fresh kernel, once as a student
runs it (NBGRADER_EXECUTION unset) and once as the autograder does (NBGRADER_EXECUTION=autograde).
Prints a table per notebook (wall time with kernel start, and the slowest cell) and the totals next
to the goals, with their ratio:

* under the grader: the whole series <= 120 s, and no cell over 30 s;
* as a student: notebooks 01-07 together <= 60 s, notebook 08 <= 300 s.

The machine is shared: the load average is printed before and after.
"""
from __future__ import annotations

import argparse
import datetime
import os
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from bench_exact import cpu_model  # bench/ is on sys.path when run as a script

SOURCE = Path(__file__).resolve().parents[1] / "source" / "ch11"
GRADER_SERIES_GOAL_S = 120.0
GRADER_CELL_GOAL_S = 30.0
STUDENT_01_07_GOAL_S = 60.0
STUDENT_08_GOAL_S = 150.0
MODES = {"student": False, "grader": True}


def cell_seconds(cell) -> float:
    timing = cell.metadata.get("execution", {})
    if "iopub.execute_input" not in timing or "shell.execute_reply" not in timing:
        return 0.0
    start, end = (datetime.datetime.fromisoformat(timing[k].rstrip("Z"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


def run(path: Path, grader: bool) -> tuple[float, float, str]:
    """(total wall seconds with kernel start, slowest cell's seconds, its grade_id or index)."""
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    if grader:
        env["NBGRADER_EXECUTION"] = "autograde"
    env["LMPOLICY_PROGRESS_FILE"] = str(Path(tempfile.mkdtemp()) / "progress.json")
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, kernel_name="python3", timeout=900, record_timing=True,
                   resources={"metadata": {"path": str(SOURCE)}}).execute(env=env)
    total = time.perf_counter() - start
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    index, slowest = max(code, key=lambda item: cell_seconds(item[1]))
    return total, cell_seconds(slowest), slowest.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")


def ratio_line(what: str, seconds: float, goal: float) -> str:
    verdict = "met" if seconds <= goal else "MISSED"
    return f"{what:40} {seconds:7.1f} s   goal <= {goal:5.0f} s   ratio {seconds / goal:5.2f}   {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(MODES), help="run one mode only")
    parser.add_argument("names", nargs="*", help="notebook names, e.g. 01_policy_softmax (default: all)")
    args = parser.parse_args()
    paths = [SOURCE / f"{n}.ipynb" for n in args.names] or sorted(SOURCE.glob("*.ipynb"))
    modes = [args.only] if args.only else list(MODES)
    print(f"{os.cpu_count()} CPUs ({cpu_model()}), load average {os.getloadavg()[0]:.1f} before")
    print(f"{'notebook':24} {'mode':8} {'total s':>8}   {'slowest cell':36} {'s':>6}")
    totals: dict[tuple[str, str], float] = {}
    slowest_grader_cell = 0.0
    for path in paths:
        for mode in modes:
            total, slowest, where = run(path, MODES[mode])
            totals[path.stem, mode] = total
            if mode == "grader":
                slowest_grader_cell = max(slowest_grader_cell, slowest)
            print(f"{path.stem:24} {mode:8} {total:8.1f}   {where:36} {slowest:6.1f}", flush=True)

    print()
    if "grader" in modes:
        print(ratio_line("grader: the whole series", sum(t for (_, m), t in totals.items() if m == "grader"),
                         GRADER_SERIES_GOAL_S))
        print(ratio_line("grader: the slowest cell", slowest_grader_cell, GRADER_CELL_GOAL_S))
    if "student" in modes:
        first_seven = [t for (name, m), t in totals.items() if m == "student" and name[:2] < "08"]
        print(ratio_line(f"student: 01-07 together ({len(first_seven)} notebooks)", sum(first_seven),
                         STUDENT_01_07_GOAL_S))
        for (name, m), t in totals.items():
            if m == "student" and name.startswith("08"):
                print(ratio_line("student: 08", t, STUDENT_08_GOAL_S))
    print(f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
