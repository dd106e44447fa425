"""A class at nine o'clock on the course's hub, in figures (run from the repository root, as root):

    PATH=node_modules/.bin:$PATH .venv/bin/python bench/bench_hub.py [--students 20] [--slots N] [--rounds 3]

The hub is the course's own (deploy/jupyterhub_config.py, started by tests/deploy/hub.py's harness: local accounts,
the shared exchange, a throw-away PostgreSQL gradebook), driven through its REST API and its proxy.

1. One server's start, side by side: the stock `jupyterhub-singleuser` and the course's
   `deploy/singleuser/start.py` (the same server without building the IRI grammar and asking yarn for the npm
   registry), ``--rounds`` times each, interleaved, one student, nothing else starting. For each: seconds from
   the request to the server answering through the proxy, and the CPU-seconds the server used to get there
   (the load-independent cost of a start: what a core must give each student at nine o'clock).
2. The class: ``--students`` students ask for their server at the same moment (the instructor's is up and ch11
   released); every one watches the spawn page's progress (its place in the start queue), then fetches, saves and
   submits (every third twice: blank then reference or the reverse); the instructor collects, grades with
   `python -m lmpolicy_grader grade` and releases feedback; everyone fetches it. Printed: time to ready (p50, p95,
   max), failures, how many waited in line, CPU-seconds per start, memory per idle server (PSS), the load average
   (1 min) and the hub's answer time to GET /hub/api/ while the class starts (a stalled event loop answers late),
   each phase's duration, and whether every submission was collected (the newest copy), graded, fed back and
   exported right (tests/deploy/course_flow.py's ClassRun, which tests/deploy/test_hub_class.py runs small).

The machine is shared: the load average before, during and after is printed beside the figures; compare runs
only with it. Exit status 1 when a student was not served right.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.deploy.course_flow import ClassRun, Sampler, cpu_seconds, formgrader_action, percentile  # noqa: E402
from tests.deploy.hub import (ASSIGNMENT, RUN_TAG, check_tools, make_site, remove_site, start_hub,  # noqa: E402
                              stop_hub)
from tests.deploy.postgres_cluster import running_postgres  # noqa: E402


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def single_starts(rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(seconds to ready, CPU-seconds) of one student's server, stock and the course's start, interleaved."""
    site = make_site(students=(f"{RUN_TAG}-solo",), instructor=f"{RUN_TAG}-soloteacher")
    student = site.students[0]
    measured = {"stock jupyterhub-singleuser": [], "deploy/singleuser/start.py": []}
    hub = None
    try:
        for number in range(rounds):
            for variant in measured:
                stock = variant.startswith("stock")
                if hub is None:
                    hub = start_hub(site, servers=(), settings={"LMPOLICY_HUB_STOCK_SINGLEUSER": "1" if stock else "0"})
                else:
                    hub.env["LMPOLICY_HUB_STOCK_SINGLEUSER"] = "1" if stock else "0"
                    hub.start()
                began = time.monotonic()
                hub.start_server(student)
                ready = time.monotonic() - began
                cpu = cpu_seconds(hub.server_pid(student))
                measured[variant].append((ready, cpu))
                print(f"  round {number + 1}, {variant}: ready in {ready:.1f} s, {cpu:.2f} CPU-s (load {load()})",
                      flush=True)
                hub.stop_server(student)
                hub.stop()
    finally:
        if hub is not None:
            stop_hub(hub)
        remove_site(site)
    return measured


def class_at_once(students: int, slots: int | None) -> tuple[ClassRun, Sampler, dict[str, float]]:
    names = tuple(f"{RUN_TAG}-s{number:02d}" for number in range(1, students + 1))
    site = make_site(students=names, instructor=f"{RUN_TAG}-teacher")
    settings = {"LMPOLICY_HUB_START_SLOTS": str(slots)} if slots else {}
    phases = {}
    hub = None
    try:
        with running_postgres() as gradebook:
            hub = start_hub(site, gradebook_url=gradebook.new_database("bench_gradebook"), settings=settings,
                            servers=(site.instructor,))
            formgrader_action(hub, f"assignment/{ASSIGNMENT}/assign")
            formgrader_action(hub, f"assignment/{ASSIGNMENT}/release")
            run = ClassRun(hub, site)
            print(f"  the class asks for its servers (load {load()})", flush=True)
            with Sampler(hub) as sampler:
                began = time.monotonic()
                run.start()
                phases["start (all ready)"] = time.monotonic() - began
            print(f"  ready; submitting (load {load()})", flush=True)
            began = time.monotonic()
            run.submit()
            phases["fetch, save, submit"] = time.monotonic() - began
            began = time.monotonic()
            run.grade_and_feed_back()
            phases["collect, grade, feedback, export"] = time.monotonic() - began
            problems = run.problems()  # while the hub and the servers still run
            stop_hub(hub)
            hub = None
    finally:
        if hub is not None:
            stop_hub(hub)
        remove_site(site)
    run.found = problems
    return run, sampler, phases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20, help="students who start at once (default 20)")
    parser.add_argument("--slots", type=int, default=None,
                        help="servers loading at once (LMPOLICY_HUB_START_SLOTS; default: the hub's, two per core)")
    parser.add_argument("--rounds", type=int, default=3, help="single starts of each kind, side by side (0: none)")
    args = parser.parse_args()
    if args.students < 1 or args.rounds < 0:
        parser.error("--students must be at least 1 and --rounds at least 0")
    check_tools_or_exit()
    cores = len(os.sched_getaffinity(0))
    print(f"machine: {cores} cores, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB; "
          f"load average (1/5/15 min) {load()}", flush=True)

    if args.rounds:
        print(f"\n1. one server's start, {args.rounds} rounds, interleaved", flush=True)
        measured = single_starts(args.rounds)
        print(f"\n   {'command':30s} {'ready s (median)':>17s} {'CPU-s (median)':>15s}")
        medians = {}
        for variant, values in measured.items():
            medians[variant] = (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
            print(f"   {variant:30s} {medians[variant][0]:17.1f} {medians[variant][1]:15.2f}")
        stock, course = medians.values()
        print(f"   the course's start / stock: {course[0] / stock[0]:.2f}x the time, {course[1] / stock[1]:.2f}x the CPU")

    print(f"\n2. {args.students} students at once (slots: {args.slots or 'the hub default, ' + str(2 * cores)})", flush=True)
    run, sampler, phases = class_at_once(args.students, args.slots)
    ready = run.ready_times()
    failed = [r for r in run.students.values() if r.ready_after is None]
    cpu = [r.start_cpu for r in run.students.values() if r.start_cpu is not None]
    student_memory = [run.memory[s] for s in run.site.students if run.memory.get(s)]
    print(f"   ready: {len(ready)} of {args.students}; p50 {percentile(ready, 0.5):.1f} s, "
          f"p95 {percentile(ready, 0.95):.1f} s, max {max(ready, default=float('nan')):.1f} s")
    print(f"   failures: {len(failed)}" + "".join(f"\n     {r.name}: {r.error}" for r in failed))
    print(f"   waited in line (told so on the spawn page): {len(run.queued())} of {args.students}")
    if cpu:
        print(f"   CPU-seconds per start: mean {statistics.mean(cpu):.2f}, max {max(cpu):.2f}; "
              f"{args.students} starts = {sum(cpu):.0f} CPU-s = {sum(cpu) / cores:.0f} s of the {cores} cores")
    if student_memory:
        print(f"   memory (PSS) of an idle server: student mean {statistics.mean(student_memory):.0f} MiB, "
              f"max {max(student_memory):.0f} MiB; instructor {run.memory.get(run.site.instructor, 0):.0f} MiB")
    latencies = [x for x in sampler.hub_latencies if x != float("inf")]
    print(f"   load average (1 min) while starting: max {max(sampler.loads, default=0):.1f}; "
          f"GET /hub/api/ answered in p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
          f"max {max(latencies, default=0) * 1000:.0f} ms ({len(sampler.hub_latencies) - len(latencies)} unanswered)")
    for phase, seconds in phases.items():
        print(f"   {phase}: {seconds:.1f} s")
    twice = sum(len(r.plan) == 2 for r in run.students.values())
    print(f"   submissions: {sum(r.submitted for r in run.students.values())} accepted ({twice} students twice)")
    if run.found:
        print("   NOT served right:\n" + "\n".join(f"     - {p}" for p in run.found))
    else:
        print("   every submission collected (the newest copy), graded, fed back and exported right")
    print(f"\nload average (1/5/15 min) at the end: {load()}")
    return 1 if run.found or failed else 0


def check_tools_or_exit() -> None:
    try:
        check_tools()
    except BaseException as error:  # pytest's skip/fail outside pytest
        sys.exit(f"bench_hub: cannot run here: {error}")


if __name__ == "__main__":
    sys.exit(main())
