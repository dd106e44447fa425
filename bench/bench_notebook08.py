"""Which torch thread setting should notebook 08 train with? Its student run with 1 and 2 threads, quiet and busy.

    python bench/bench_notebook08.py [--updates 40] [--full] [--rounds 1]

Notebook 08's student training is ``reinforce.train(reinforce.Recipe())`` from the shipped checkpoint (the
notebook passes the student's three pieces; the library's reference pieces compute the same thing). This
runs its first ``--updates`` updates (``--full``: the whole run, until the targets), measured on the held-out
problems every ``Recipe().eval_every_updates`` updates as in the notebook, four ways, one after the other
in one process:

* 1 thread and 2 threads, on the machine as it is ("quiet");
* the same two with a competing CPU-bound process (a Python busy loop, one core's worth) started
  by this script and stopped after.

Prints, for each, the updates, the training time, the whole run's wall time (measuring included: what
the notebook cell takes), updates per second of wall time, and the ratios: 2 threads / 1 thread under
each load, and each run against 1 thread quiet. The machine is shared and noisy: read the ratios, not
the seconds. The load average is printed before and after. It also checks that a run's numbers depend
on its thread setting only, not on the load: the same seed and threads must end at the same accuracy.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from contextlib import contextmanager

from bench_exact import cpu_model  # bench/ is on sys.path when run as a script
from lmpolicy.tinylm import reinforce
from lmpolicy.tinylm.model import load_pretrained

THREADS = (1, 2)


@contextmanager
def competing_process(busy: bool):
    """A CPU-bound busy loop in another process while the block runs (nothing if not ``busy``)."""
    if not busy:
        yield
        return
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        loop.kill()
        loop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=40, help="updates per run (default 40; --full for the whole run)")
    parser.add_argument("--full", action="store_true", help="the notebook's whole run, stopping at the targets")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the four runs this many times")
    args = parser.parse_args()

    notebook = reinforce.Recipe()
    if args.full:
        recipe = notebook
    else:
        recipe = dataclasses.replace(notebook, max_updates=args.updates, stop_at_target=False)
    print(f"{os.cpu_count()} CPUs ({cpu_model()}), load average {os.getloadavg()[0]:.1f} before")
    print(f"notebook 08's run: {notebook}")
    print(f"measured here: {recipe.max_updates} updates{' or until the targets' if recipe.stop_at_target else ''}, "
          f"held-out measurement every {recipe.eval_every_updates}\n")
    start = load_pretrained()
    rows = []  # (round, load, threads, history)
    for round_ in range(args.rounds):
        for load in ("quiet", "busy"):
            with competing_process(load == "busy"):
                for threads in THREADS:
                    h = reinforce.train(dataclasses.replace(recipe, threads=threads), start,
                                        label=f"{threads} thread{'s' * (threads > 1)}, {load}", progress=False).history
                    rows.append((round_, load, threads, h))
                    print(f"  done: {h.label:20} {h.updates[-1]} updates, {h.wall_seconds:.1f} s", flush=True)

    print(f"\n{'run':22} {'updates':>8} {'train s':>8} {'wall s':>8} {'updates/s':>10} {'vs 1 thread quiet':>18} "
          f"{'greedy':>7} {'sampled':>8}")
    for round_ in range(args.rounds):
        runs = {(load, threads): h for r, load, threads, h in rows if r == round_}
        base = runs["quiet", 1]
        for (load, threads), h in runs.items():
            rate = h.updates[-1] / h.wall_seconds
            print(f"{h.label:22} {h.updates[-1]:8d} {h.seconds[-1]:8.1f} {h.wall_seconds:8.1f} {rate:10.2f} "
                  f"{h.wall_seconds / base.wall_seconds:17.2f}x {h.greedy[-1]:7.3f} {h.sampled[-1]:8.3f}")
        for load in ("quiet", "busy"):
            ratio = runs[load, 2].wall_seconds / runs[load, 1].wall_seconds
            print(f"  {load}: wall time 2 threads / 1 thread = {ratio:.2f}"
                  f" ({'2 threads faster' if ratio < 1 else '1 thread faster'})")
        print(f"  1 thread: busy / quiet = {runs['busy', 1].wall_seconds / base.wall_seconds:.2f};  2 threads: busy / "
              f"quiet = {runs['busy', 2].wall_seconds / runs['quiet', 2].wall_seconds:.2f}")
        for threads in THREADS:
            quiet, busy = runs["quiet", threads], runs["busy", threads]
            same = (quiet.greedy, quiet.sampled, quiet.kl) == (busy.greedy, busy.sampled, busy.kl)
            print(f"  {threads} thread(s): the same numbers quiet and busy: {'yes' if same else 'NO'}")
    print(f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
