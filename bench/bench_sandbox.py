"""What the grading sandbox costs, measured side by side (run from the repository root):

    .venv/bin/python bench/bench_sandbox.py [--rounds 3] [--notebooks 01_policy_softmax,03_three_stages,06_kl_estimators]

One submission (the reference's notebooks 01, 03 and 06), one worker. Each round measures, one after
the other and in this order:

1. bare: its notebooks executed one after the other with nbclient in the stock ``python3`` kernel,
   ``NBGRADER_EXECUTION=autograde`` set, no nbgrader (the time the notebooks themselves need);
2. the course's grader with the sandbox off: ``python -m lmpolicy_grader grade --student reference
   --workers 1 --sandbox off`` (process start, worker start-up, sanitizing, the grading and trusted
   kernels, gradebook, feedback: everything an instructor waits for);
3. the same with the sandbox on (``--sandbox on``);
4. the same without spare kernels (``c.GradingExecute.spare_kernels = False``: each notebook starts its
   two kernels when it comes, as the grader did before ``kernel_pool``);
5. the same with spares but without the sandbox's control group (``c.GradingKernelManager.cgroup = False``;
   only where control groups can be made, i.e. as root);
6. the same with the trusted test kernel started from its command line instead of forked from the
   zygote (``c.TrustedKernelManager.forked = False``, as before ``forked_kernel``);
7. the same with the grading kernel started from its command line in its sandbox instead of forked into it
   (``c.GradingKernelManager.forked = False``, as before ``isolation.entering``).

Rounds interleave the seven, so a change of machine load hits all of them alike; the table gives every
round and the median, with the ratios grader/bare (goal <= 1.2), sandbox on/off, spares on/off,
control group on/off and forked/not forked (each kernel).

Then where the time goes, each part measured the same number of times (median):
- a stock kernel: start to ready, and ``import torch`` in it;
- the trusted test kernel (unsandboxed), forked and not: start to ready, and importing the trusted side
  (torch) in the forked one;
- the grading kernel, start to ready (it loads the channel server), unsandboxed, and sandboxed forked and not;
  bubblewrap alone (``/bin/true`` in the sandbox);
- starting the grader process: ``import nbgrader.converters`` and the course's preprocessors;
- each notebook's own grading time (the grader's ``Outcome.seconds``), sandbox off and on.

Everything runs in a temporary course; the repository is not touched. The load average is printed
before and after: the machine is shared, and the figures move with it.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

from bench_grading import _cpu_model, _run, bare_execution  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
GRADE = [PYTHON, "-m", "lmpolicy_grader", "grade", "--no-release", "--no-examples", "--student", "reference",
         "--workers", "1"]
GOAL_RATIO = 1.2  # issue 20: one submission, one worker, within 1.2x its bare execution


@dataclass
class Settings:
    rounds: int = 3
    """rounds of (bare, sandbox off, sandbox on), interleaved"""
    notebooks: str = "01_policy_softmax,03_three_stages,06_kl_estimators"
    """comma-separated notebooks of the submission"""


def make_course(notebooks: list[str]) -> Path:
    """A course with only ``notebooks``, released, and the reference as its one student."""
    root = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    (root / "source" / "ch11").mkdir(parents=True)
    for name in notebooks:
        shutil.copy(REPO / "source" / "ch11" / f"{name}.ipynb", root / "source" / "ch11")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    _run([PYTHON, "-m", "lmpolicy_grader", "release"], root)
    _run([PYTHON, "-c", "from lmpolicy_grader.class_grading.examples_course import place_examples; place_examples('.')"], root)
    for student in os.listdir(root / "submitted"):
        if student != "reference":
            shutil.rmtree(root / "submitted" / student)
    return root


def configured(root: Path, setting: str) -> Path:
    """A copy of the course ``root`` whose nbgrader_config.py ends with ``setting``."""
    copy = Path(tempfile.mkdtemp(prefix="bench-sandbox-variant-")) / "course"
    shutil.copytree(root, copy)
    with open(copy / "nbgrader_config.py", "a") as config:
        config.write(f"\n{setting}\n")
    return copy


def _unit_seconds(root: Path) -> dict[str, float]:
    return {o["notebook"]: o["seconds"] for o in json.loads((root / "grading_status.json").read_text())
            if o["student"] == "reference"}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# --- the parts --------------------------------------------------------------------------------

async def _kernel_ready(manager, cwd: Path, code: str | None = None) -> tuple[float, float]:
    """(seconds from start to ready, seconds ``code`` took in it) for one kernel of ``manager``."""
    started = time.perf_counter()
    await manager.start_kernel(cwd=str(cwd))
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
        ready = time.perf_counter() - started
        ran = 0.0
        if code:
            started = time.perf_counter()
            reply = await client.execute_interactive(code, timeout=120)
            assert reply["content"]["status"] == "ok", reply["content"]
            ran = time.perf_counter() - started
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)
    return ready, ran


def kernel_parts(cwd: Path) -> dict[str, float]:
    from jupyter_client.manager import AsyncKernelManager

    from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager
    from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager

    def timed(manager, code=None):
        return asyncio.run(_kernel_ready(manager, cwd, code))

    stock_ready, torch_import = timed(AsyncKernelManager(kernel_name="python3"), "import torch")
    timed(TrustedKernelManager())  # the zygote started (once per grader process), so what follows is the fork
    trusted_ready, trusted_import = timed(TrustedKernelManager(), "import lmpolicy_grader.trusted_tests.proxies")
    unforked_ready, _ = timed(TrustedKernelManager(forked=False), "import lmpolicy_grader.trusted_tests.proxies")
    grading_off, _ = timed(GradingKernelManager(sandbox=False))
    timed(GradingKernelManager(sandbox=True))  # the grading kernels' zygote started, as for the trusted one
    grading_on, _ = timed(GradingKernelManager(sandbox=True))
    grading_started, _ = timed(GradingKernelManager(sandbox=True, forked=False))
    return {"stock kernel: start to ready": stock_ready, "stock kernel: import torch": torch_import,
            "trusted test kernel, forked from the running zygote: start to ready": trusted_ready,
            "trusted test kernel, not forked: start to ready (then its imports)": unforked_ready,
            "trusted test kernel: import trusted_tests (numpy, torch, lmpolicy)": trusted_import,
            "grading kernel, sandbox off: start to ready (call server imports torch)": grading_off,
            "grading kernel, sandbox on, forked into it: start to ready": grading_on,
            "grading kernel, sandbox on, not forked: start to ready": grading_started}


def bwrap_alone(cwd: Path) -> float:
    from lmpolicy_grader.isolation.sandbox import Sandbox

    box = Sandbox.create(cwd)
    try:
        command = box.command(["/bin/true"], {})
        started = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True)
        return time.perf_counter() - started
    finally:
        box.remove()


def grader_import() -> float:
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", "import nbgrader.converters, distributed, lmpolicy_grader.nbgrader_plugins"], check=True)
    return time.perf_counter() - started


# --- the run ----------------------------------------------------------------------------------

def main(s: Settings) -> None:
    notebooks = [n for n in s.notebooks.split(",") if n]
    print(f"machine: {os.cpu_count()} cores, {_cpu_model()}; notebooks: {', '.join(notebooks)}; "
          f"{s.rounds} rounds; load average {_load()}")
    from lmpolicy_grader.isolation.cgroup import cgroup_problem
    root = make_course(notebooks)
    variants = {"no spares": configured(root, "c.GradingExecute.spare_kernels = False"),
                "not forked": configured(root, "c.TrustedKernelManager.forked = False"),
                "grading not forked": configured(root, "c.GradingKernelManager.forked = False")}
    if cgroup_problem() is None:
        variants["no cgroup"] = configured(root, "c.GradingKernelManager.cgroup = False")
    else:
        print(f"  (no control group variant: {cgroup_problem()})")
    times = {"bare": [], "off": [], "on": [], **{name: [] for name in variants}}
    units = {"off": [], "on": []}
    for number in range(1, s.rounds + 1):
        times["bare"].append(bare_execution(root))  # the source notebooks, in source/ch11
        for mode in ("off", "on"):
            times[mode].append(_run(GRADE + ["--sandbox", mode], root))
            units[mode].append(_unit_seconds(root))
        for name, course in variants.items():
            times[name].append(_run(GRADE + ["--sandbox", "on"], course))
        print(f"  round {number}: " + ", ".join(f"{name} {seconds[-1]:.1f} s" for name, seconds in times.items())
              + f" (load {_load()})")
    bare, off, on, cold = (statistics.median(times[k]) for k in ("bare", "off", "on", "no spares"))
    print(f"\none submission ({len(notebooks)} notebooks), 1 worker, median of {s.rounds} rounds")
    print(f"  bare execution (nbclient, stock kernel)        {bare:7.1f} s")
    print(f"  lmpolicy_grader grade, sandbox off             {off:7.1f} s   grader/bare {off / bare:.2f}")
    print(f"  lmpolicy_grader grade, sandbox on              {on:7.1f} s   grader/bare {on / bare:.2f} "
          f"(goal <= {GOAL_RATIO}: {'met' if on / bare <= GOAL_RATIO else 'missed'})")
    print(f"  sandbox on / off                               {on / off:7.2f}")
    print(f"  sandbox on, without spare kernels              {cold:7.1f} s   grader/bare {cold / bare:.2f}; "
          f"with spares / without {on / cold:.2f}")
    unforked = statistics.median(times["not forked"])
    print(f"  sandbox on, trusted kernel not forked          {unforked:7.1f} s   grader/bare {unforked / bare:.2f}; "
          f"forked / not forked {on / unforked:.2f}")
    started = statistics.median(times["grading not forked"])
    print(f"  sandbox on, grading kernel not forked          {started:7.1f} s   grader/bare {started / bare:.2f}; "
          f"forked / not forked {on / started:.2f}")
    if "no cgroup" in times:
        ungrouped = statistics.median(times["no cgroup"])
        print(f"  sandbox on, without its control group          {ungrouped:7.1f} s   "
              f"with the group / without {on / ungrouped:.2f}")

    print(f"\nwhere the time goes (median of {s.rounds})")
    folder = root / "autograded" / "reference" / "ch11"
    parts: dict[str, list[float]] = {}
    for _ in range(s.rounds):
        for name, seconds in kernel_parts(folder).items():
            parts.setdefault(name, []).append(seconds)
        parts.setdefault("bubblewrap alone: /bin/true in the sandbox", []).append(bwrap_alone(folder))
        parts.setdefault("grader start-up: import nbgrader, distributed, preprocessors", []).append(grader_import())
    for name, values in parts.items():
        print(f"  {name:66} {statistics.median(values):6.2f} s")
    for mode in ("off", "on"):
        per_notebook = {name: statistics.median(u[name] for u in units[mode]) for name in notebooks}
        listed = ", ".join(f"{name[:2]} {seconds:.1f}" for name, seconds in per_notebook.items())
        total = sum(per_notebook.values())
        print(f"  grading each notebook, sandbox {mode:3} (Outcome.seconds): {listed}; sum {total:.1f} s, "
              f"so {(off if mode == 'off' else on) - total:.1f} s of the run is outside the notebooks")
    print(f"\nload average after: {_load()}")
    shutil.rmtree(root)
    for course in variants.values():
        shutil.rmtree(course.parent)


if __name__ == "__main__":
    main(tyro.cli(Settings))
