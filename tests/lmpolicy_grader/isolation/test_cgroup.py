"""A sandbox's processes share one control group: its memory, CPU and processes are capped together.

Driven through the real grading kernel (``grading_kernel.run_in_kernel``): the submission's code starts
several processes, each within every per-process limit, that together exceed the sandbox's share."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from lmpolicy_grader.isolation import cgroup, sandbox
from lmpolicy_grader.kernels import grading_kernel as kernel

from ..grading_kernel import run_in_kernel

# Skipped where no control group can be made (not root, read-only cgroups: grading then warns and keeps the
# per-process limits, see the last test), and where no sandbox can be made outside CI.
pytestmark = pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                                reason=f"no sandbox here: {sandbox.sandbox_problem()}")
needs_cgroup = pytest.mark.skipif(cgroup.cgroup_problem() is not None,
                                  reason=f"no control group here: {cgroup.cgroup_problem()}")



def children(child: str, n: int = 3) -> str:
    """Code that starts ``n`` copies of ``child`` at once and prints what each said and how it ended."""
    return (f"import json, subprocess, sys\nCHILD = {child!r}\n"
            f"children = [subprocess.Popen([sys.executable, '-c', CHILD], stdout=subprocess.PIPE, text=True) for _ in range({n})]\n"
            "print(json.dumps([(c.communicate()[0].strip(), c.returncode) for c in children]))")

SPINNER = "import time; t = time.monotonic()\nwhile time.monotonic() - t < 2: pass\nprint(time.process_time())"
HOLDER = "import time; held = b'x' * (400 * 1024**2); print('held'); time.sleep(3)"


@pytest.fixture
def groups(monkeypatch):
    """The control groups made while the test runs, each with what its files said just before removal."""
    made = []
    create, remove = cgroup.SandboxCgroup.create, cgroup.SandboxCgroup.remove

    def recording_create(*args, **kwargs):
        made.append(create(*args, **kwargs))
        made[-1].name, made[-1].last_read = args[0], {}
        return made[-1]

    def reading_remove(self, *args, **kwargs):
        for folder in self.folders:
            for name in ("cpu.stat",):
                if (folder / name).exists():
                    self.last_read[name] = dict(line.split() for line in (folder / name).read_text().splitlines())
        return remove(self, *args, **kwargs)
    monkeypatch.setattr(sandbox.SandboxCgroup, "create", recording_create)
    monkeypatch.setattr(cgroup.SandboxCgroup, "remove", reading_remove)
    return made


@needs_cgroup
def test_spinning_processes_get_the_sandboxs_cpu_share_together(sandbox_course, groups):
    _, folder = sandbox_course
    # a quarter of a core for the whole sandbox: 3 spinners x 2 s of wall clock get about 0.5 CPU-s together
    ended = run_in_kernel(folder, children(SPINNER), cpu_cores=0.25)
    assert [code for _, code in ended] == [0, 0, 0], ended
    assert sum(float(said) for said, _ in ended) < 0.8, ended
    (group,) = groups
    stat = group.last_read["cpu.stat"]  # the cap acted: the group wanted more and was held back
    assert int(stat["nr_throttled"]) > 0, stat
    assert int(stat.get("throttled_time", stat.get("throttled_usec", 0))) > 0, stat


def hold(folder, **traits) -> list:
    """How 3 processes that each hold 400 MiB for 3 s at once ended, in a sandbox of 1 GiB."""
    return run_in_kernel(folder, children(HOLDER), memory_bytes=1024**3, **traits)


@needs_cgroup
def test_processes_that_hold_more_than_the_sandboxs_memory_together_are_stopped(sandbox_course):
    _, folder = sandbox_course
    ended = hold(folder)
    # each is within its own 1 GiB address space, together they are past the sandbox's 1 GiB: one is killed
    assert ["", -9] in ended, ended
    assert sum(code == 0 for _, code in ended) < 3, ended


def test_without_the_group_each_holds_its_share(sandbox_course):
    _, folder = sandbox_course
    assert hold(folder, cgroup=False) == [["held", 0]] * 3


@needs_cgroup
def test_every_group_is_removed_with_its_kernel(sandbox_course, groups):
    _, folder = sandbox_course
    assert run_in_kernel(folder, "import json; print(json.dumps('ok'))") == "ok"
    (group,) = groups
    assert group.folders == [] and group.pids() == set()
    left = [*cgroup.ROOT.glob(f"*/{cgroup.PARENT}/{group.name}"), *cgroup.ROOT.glob(f"{cgroup.PARENT}/{group.name}")]
    assert left == [], "a group outlived its kernel"


@needs_cgroup
def test_the_groups_a_killed_grader_left_are_removed_once_empty_and_old():
    # a grader killed with -9 (a Dask worker, in test_dask_cluster) never removes its sandboxes' groups
    limits = {"memory_bytes": 64 * 1024**2, "max_processes": 16, "cpu_cores": 1.0}
    left = cgroup.SandboxCgroup.create(f"lmpolicy-test-left-{os.getpid()}", **limits)
    busy = cgroup.SandboxCgroup.create(f"lmpolicy-test-busy-{os.getpid()}", **limits)
    sleeper = subprocess.Popen(busy.join_command() + ["sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not busy.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert busy.pids() == {sleeper.pid}
        assert cgroup.remove_abandoned(pattern="lmpolicy-test-*") == []   # both made just now
        time.sleep(1.1)
        assert cgroup.remove_abandoned(older_than=1.0, pattern="lmpolicy-test-*") == [f"lmpolicy-test-left-{os.getpid()}"]
        assert not any(folder.exists() for folder in left.folders)
        assert all(folder.exists() for folder in busy.folders)   # it still holds a process
    finally:
        sleeper.kill()
        sleeper.wait()
        busy.remove()
        left.remove()
    assert not any(folder.exists() for folder in busy.folders)


def test_where_no_group_can_be_made_grading_warns_and_keeps_the_per_process_limits(sandbox_course, monkeypatch, caplog):
    _, folder = sandbox_course
    monkeypatch.setattr(kernel, "cgroup_problem", lambda: "a test says so")
    monkeypatch.setattr(kernel, "_warned", set())
    made = []
    monkeypatch.setattr(sandbox.SandboxCgroup, "create", lambda *a, **k: made.append(a))
    manager = kernel.GradingKernelManager()
    assert manager._group_limits() is None
    assert "limited one by one, not together: a test says so" in caplog.text
    assert run_in_kernel(folder, "import json; print(json.dumps('ok'))") == "ok"
    assert made == []
