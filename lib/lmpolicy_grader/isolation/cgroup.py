"""One control group per sandbox: memory, processes and CPU counted for the whole sandbox, not per process.

The kernel's prlimit limits count per process (address space, CPU time) or per uid (processes), so a
submission that forks could hold many times the memory limit, and its spinning processes would take the
CPU from the kernels graded beside it. A control group counts all of a sandbox's processes together:

- memory: the resident memory of every process in the sandbox and the pages of its tmpfs folders, together;
  past it the kernel's OOM killer ends one of them (the notebook is then FAILED "kernel died");
- pids: the processes and threads of the sandbox;
- cpu: at most ``cpu_cores`` cores, however many processes spin.

The sandbox's first process, a shell that then becomes bwrap, writes its own pid into the group, so
everything the sandbox ever runs is inside before any of it runs. The group is removed with its sandbox;
the groups of a grader killed before it could do that are removed, once empty, by the next grader. Making groups needs root (or a delegated
cgroup v2 subtree): where they cannot be made, ``cgroup_problem`` says why and the per-process limits stand
alone (docs/threat_model.md).
"""
from __future__ import annotations

import os
import shlex
import signal
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "lmpolicy-grading"      # every sandbox's group lives under this one
CPU_PERIOD_US = 100_000
_V1_CONTROLLERS = ("memory", "pids", "cpu")
_ONLY_WITH_SWAP_ACCOUNTING = ("memory.memsw.limit_in_bytes", "memory.swap.max")


class CgroupUnavailable(RuntimeError):
    """No control group can be made here; the message says why."""


def _is_v2() -> bool:
    return (ROOT / "cgroup.controllers").exists()


def _settings(memory_bytes: int, max_processes: int, cpu_cores: float) -> dict[str, dict[str, str]]:
    """controller -> {file: value}; on cgroup v2 all in one group (controller ``""``)."""
    quota = max(1000, int(cpu_cores * CPU_PERIOD_US))
    if _is_v2():
        return {"": {"memory.max": str(memory_bytes), "memory.swap.max": "0", "pids.max": str(max_processes),
                     "cpu.max": f"{quota} {CPU_PERIOD_US}"}}
    return {"memory": {"memory.limit_in_bytes": str(memory_bytes), "memory.memsw.limit_in_bytes": str(memory_bytes)},
            "pids": {"pids.max": str(max_processes)},
            "cpu": {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(quota)}}


@lru_cache(maxsize=None)
def _parent(controller: str) -> Path:
    """The folder every sandbox group of ``controller`` lives in, made (and on v2 given the controllers)
    once per process."""
    parent = ROOT / controller / PARENT if controller else ROOT / PARENT
    parent.mkdir(exist_ok=True)
    if not controller:  # v2: the controllers must be handed down to the parent's children
        for level in (ROOT, parent):
            (level / "cgroup.subtree_control").write_text("+memory +pids +cpu")
    return parent


@dataclass
class SandboxCgroup:
    """The control group(s) of one sandbox: one folder on cgroup v2, one per controller on v1."""

    folders: list[Path]

    @classmethod
    def create(cls, name: str, memory_bytes: int, max_processes: int, cpu_cores: float) -> "SandboxCgroup":
        """Make the group ``name`` with these limits; raises CgroupUnavailable (nothing left behind)."""
        group = cls([])
        try:
            for controller, files in _settings(memory_bytes, max_processes, cpu_cores).items():
                folder = _parent(controller) / name
                folder.mkdir()
                group.folders.append(folder)
                for file, value in files.items():
                    if file in _ONLY_WITH_SWAP_ACCOUNTING and not (folder / file).exists():
                        continue
                    (folder / file).write_text(value)
        except OSError as error:
            group.remove()
            where = Path(error.filename).parent if error.filename else ROOT  # the parent, the same for every group
            raise CgroupUnavailable(f"cannot make a control group under {where}: {error.strerror or error}") from None
        return group

    def join_command(self) -> list[str]:
        """A command prefix that moves itself into the group, then runs the rest of the command line."""
        joins = " && ".join(f"echo $$ > {shlex.quote(str(folder / 'cgroup.procs'))}" for folder in self.folders)
        return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh"]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            try:
                found |= {int(pid) for pid in (folder / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def remove(self, wait: float = 5.0) -> None:
        """Kill whatever is still in the group, then remove it."""
        deadline = time.monotonic() + wait
        while self.folders:
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for folder in list(self.folders):
                try:
                    folder.rmdir()
                    self.folders.remove(folder)
                except FileNotFoundError:
                    self.folders.remove(folder)
                except OSError:
                    pass  # busy: its last processes are still exiting
            if self.folders and time.monotonic() > deadline:
                return  # processes that would not die (none should: the sandbox's pid namespace ends with its kernel)
            if self.folders:
                time.sleep(0.02)


def remove_abandoned(older_than: float = 600.0, pattern: str = "lmpolicy-sandbox-*") -> list[str]:
    """Remove the empty groups named like ``pattern`` made more than ``older_than`` seconds ago: those of a
    grader that was killed before it could remove them (a sandbox joins its group within milliseconds of
    making it, and a group that still holds a process cannot be removed). Returns the names removed."""
    removed = []
    parents = [ROOT / PARENT] if _is_v2() else [ROOT / controller / PARENT for controller in _V1_CONTROLLERS]
    for parent in parents:
        for folder in parent.glob(pattern) if parent.is_dir() else []:
            try:
                if time.time() - folder.stat().st_mtime > older_than and not (folder / "cgroup.procs").read_text().split():
                    folder.rmdir()
                    removed.append(folder.name)
            except OSError:
                pass  # in use, or gone already
    return sorted(set(removed))


@lru_cache(maxsize=1)
def cgroup_problem() -> str | None:
    """Why no control group can be made for a sandbox here (None: they can). Asked once per process,
    before its first sandbox; where groups can be made, it also removes those a killed grader left."""
    if not ROOT.is_dir():
        return f"{ROOT} is not mounted"
    if _is_v2():
        wanted = {"memory", "pids", "cpu"}
        missing = wanted - set((ROOT / "cgroup.controllers").read_text().split())
        if missing:
            return f"cgroup v2 here lacks the controller(s) {', '.join(sorted(missing))}"
    else:
        missing = [controller for controller in _V1_CONTROLLERS if not (ROOT / controller).is_dir()]
        if missing:
            return f"cgroup v1 here lacks the controller(s) {', '.join(missing)}"
    try:
        SandboxCgroup.create(f"trial-{os.getpid()}", 64 * 1024**2, 16, 1.0).remove()
    except CgroupUnavailable as error:
        return f"{error} (control groups need root, or a delegated cgroup v2 subtree)"
    remove_abandoned()
    return None
