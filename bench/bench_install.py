"""How long does the student's install take, and how big is it, beside the full install?

    python bench/bench_install.py [--keep]

Clones the repository's committed HEAD twice into a temporary folder and, one after the other, runs
there what a student runs (`make install`, the set of `make lab`, with npm and node hidden from PATH as on
a machine that has only python3 and make) and what CI runs (`make install-all`, the set of `make test`:
the grader's, the hub's and the tests' pins and npm's proxy). For each it prints the wall time, the
venv's size on disk (and node_modules'), the number of distributions installed, and the ratios; then the
time of a second `make install-all`, which finds everything installed and does nothing.

Both installs read the same packages from wherever pip finds them on this machine (its index, find-links
and cache, printed first): where they lie on a local disk, as here, the times are mostly unpacking and
byte-compiling, not downloading, and a student behind a slow network waits longer for both. The student's
install runs first, so the full one finds the shared wheels in the page cache; the sizes do not depend on
the order.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIDDEN_FROM_STUDENT = {"npm", "npx", "node", "nodejs", "corepack"}


def disk_mib(folder: Path) -> float:
    """Disk usage (as `du` counts it: allocated blocks, symlinks not followed) in MiB."""
    if not folder.exists():
        return 0.0
    total = 0
    for directory, _, files in os.walk(folder):
        for name in files:
            total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total / 2**20


def path_without(names: set[str], scratch: Path) -> str:
    """A PATH with every command of this one except `names` (one folder of symlinks, first match wins)."""
    folder = scratch / "bin-without-npm"
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = folder / entry.name
            if entry.name not in names and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return str(folder)


def timed_make(clone: Path, target: str, env: dict, log: Path) -> float:
    start = time.perf_counter()
    with open(log, "a") as out:
        result = subprocess.run(["make", "--no-print-directory", target], cwd=clone, env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"`make {target}` failed in {clone} (exit {result.returncode}); its output: {log}")
    return seconds


def distributions(clone: Path) -> set[str]:
    listing = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                             capture_output=True, text=True, check=True).stdout
    return {line.split("==")[0].lower() for line in listing.splitlines() if line}


def where_pip_finds_packages() -> str:
    config = subprocess.run(["python3", "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    cache = subprocess.run(["python3", "-m", "pip", "cache", "dir"], capture_output=True, text=True).stdout.strip()
    cache_note = f"{cache} ({disk_mib(Path(cache)):.0f} MiB)" if cache and Path(cache).exists() else f"{cache} (empty)"
    lines = [line for line in config.splitlines() if any(key in line for key in ("index", "find-links"))]
    return "\n".join([f"  pip cache: {cache_note}"] + [f"  {line}" for line in lines])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the two clones (their paths are printed)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-install-"))
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    student_env = dict(env, PATH=path_without(HIDDEN_FROM_STUDENT, scratch))
    assert shutil.which("npm", path=student_env["PATH"]) is None
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    print(f"install benchmark: clones of {ROOT} at {head}, in {scratch}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print("where pip finds the packages:\n" + where_pip_finds_packages())

    results = {}
    for name, target, run_env in (("student", "install", student_env), ("full", "install-all", env)):
        clone = scratch / name
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        seconds = timed_make(clone, target, run_env, scratch / f"{name}.log")
        results[name] = {"target": target, "seconds": seconds, "venv": disk_mib(clone / ".venv"),
                         "node": disk_mib(clone / "node_modules"), "dists": distributions(clone)}
        print(f"  {name:8s} `make {target}`: {seconds:6.1f} s", flush=True)
    again = timed_make(scratch / "full", "install-all", env, scratch / "full.log")

    student, full = results["student"], results["full"]
    print()
    print(f"{'':10s}{'make target':>14s}{'time (s)':>10s}{'venv (MiB)':>12s}{'node_modules (MiB)':>20s}"
          f"{'packages':>10s}")
    for name, row in results.items():
        print(f"{name:10s}{row['target']:>14s}{row['seconds']:10.1f}{row['venv']:12.0f}{row['node']:20.0f}"
              f"{len(row['dists']):10d}")
    print(f"student / full: time {student['seconds'] / full['seconds']:.2f}, "
          f"venv {student['venv'] / full['venv']:.2f}, "
          f"disk with node_modules {(student['venv'] + student['node']) / (full['venv'] + full['node']):.2f}")
    left_out = sorted(full["dists"] - student["dists"])
    print(f"the student's install leaves out {len(left_out)} packages, among them: "
          + ", ".join(name for name in left_out if name in {"jupyterhub", "dask", "distributed", "psycopg2-binary",
                                                            "pytest", "pytest-xdist", "playwright"}))
    print(f"a second `make install-all` (everything installed already): {again:.2f} s")
    if args.keep:
        print(f"kept: {scratch}")
    else:
        shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
