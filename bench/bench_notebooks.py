"""How long do the ch11 notebooks take? Wall time per notebook and its slowest cell, in a fresh kernel.

    python bench/bench_notebooks.py [--grader] [notebook names ...]

Runs every source notebook of source/ch11 (or the ones named) top to bottom, as a student runs it
(NBGRADER_EXECUTION unset) or, with --grader, as the autograder does (NBGRADER_EXECUTION=autograde),
and prints the total (kernel start included) and the slowest cell next to the goals of issue 3:
under the grader no cell over 30 s and a notebook under 60 s (08: 120 s); as a student, 01-04
together well under 30 s.
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

SOURCE = Path(__file__).resolve().parents[1] / "source" / "ch11"
CELL_GOAL_S = 30.0


def notebook_goal(name: str) -> float:
    return 120.0 if name.startswith("08") else 60.0


def cell_seconds(cell) -> float:
    timing = cell.metadata.get("execution", {})
    if "iopub.execute_input" not in timing:
        return 0.0
    start, end = (datetime.datetime.fromisoformat(timing[k].rstrip("Z"))
                  for k in ("iopub.execute_input", "shell.execute_reply"))
    return (end - start).total_seconds()


def run(path: Path, grader: bool) -> tuple[float, float, str]:
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    if grader:
        env["NBGRADER_EXECUTION"] = "autograde"
    env["LMPOLICY_PROGRESS_FILE"] = str(Path(tempfile.mkdtemp()) / "progress.json")
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, kernel_name="python3", timeout=600, record_timing=True,
                   resources={"metadata": {"path": str(SOURCE)}}).execute(env=env)
    total = time.perf_counter() - start
    slowest = max((c for c in nb.cells if c.cell_type == "code"), key=cell_seconds)
    return total, cell_seconds(slowest), slowest.metadata.get("nbgrader", {}).get("grade_id", slowest.get("id", "?"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grader", action="store_true", help="run with NBGRADER_EXECUTION=autograde")
    parser.add_argument("names", nargs="*", help="notebook names, e.g. 01_policy_softmax (default: all)")
    args = parser.parse_args()
    paths = [SOURCE / f"{n}.ipynb" for n in args.names] or sorted(SOURCE.glob("*.ipynb"))
    mode = "grader (NBGRADER_EXECUTION=autograde)" if args.grader else "student (NBGRADER_EXECUTION unset)"
    print(f"{mode}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'notebook':24} {'total s':>8} {'goal s':>7} {'ratio':>6}   {'slowest cell':28} {'s':>6} {'ratio':>6}")
    totals = {}
    for path in paths:
        total, slowest, where = run(path, args.grader)
        totals[path.stem] = total
        goal = notebook_goal(path.stem)
        print(f"{path.stem:24} {total:8.1f} {goal:7.0f} {total / goal:6.2f}   {where:28} {slowest:6.1f} {slowest / CELL_GOAL_S:6.2f}")
    first_four = [t for name, t in totals.items() if name[:2] in {"01", "02", "03", "04"}]
    if len(first_four) == 4 and not args.grader:
        print(f"01-04 together: {sum(first_four):.1f} s (goal: well under 30 s, ratio {sum(first_four) / 30:.2f})")


if __name__ == "__main__":
    main()
