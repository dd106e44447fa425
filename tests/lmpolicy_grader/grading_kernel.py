"""A grading kernel driven as GradingExecute drives it, in a course laid out as nbgrader leaves it
mid-grading: the helpers of the tests that run a submission's hostile code in the real sandbox
(test_sandbox, test_cgroup, test_hostile_sandbox), and what the grader logs meanwhile."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import textwrap
from pathlib import Path

import pytest
from traitlets.log import get_logger

from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.kernels import remote_call
from lmpolicy_grader.kernels.moving_in import TARGET as MOVING_IN
from lmpolicy_grader.kernels.grading_kernel import GradingKernelManager

from ..own_thread import run_coroutine

# What a hostile submission goes looking for, relative to the course root.
COURSE_SECRETS = ["source/ch11/01_tiny.ipynb", "gradebook.db", "submitted/other/ch11/01_tiny.ipynb",
                  "autograded/other/ch11/01_tiny.ipynb", "feedback/other/ch11/01_tiny.html", "nbgrader_config.py"]


def course_mid_grading(tmp_path: Path) -> tuple[Path, Path]:
    """A course folder as nbgrader leaves it mid-grading; returns (root, the kernel's folder)."""
    root = tmp_path / "course"
    for name in COURSE_SECRETS:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("the answers")
    folder = root / "autograded" / "me" / "ch11"
    folder.mkdir(parents=True)
    (folder / "01_tiny.ipynb").write_text("a sanitized notebook holds hidden tests")
    (folder / "data.txt").write_text("the student's own file")
    return root, folder


# The two ways a grading kernel starts: for its notebook, or as a spare that is given its notebook later.
started = pytest.mark.parametrize("spare", [False, True], ids=["for-its-notebook", "as-a-spare"])


def run_in_kernel(folder: Path, code: str, sandbox: bool = True, spare: bool = False, **traits) -> dict:
    """Run ``code`` in a grading kernel started in ``folder`` (or, ``spare``, started before it was
    known and moved in as GradingExecute does); returns the JSON it prints last."""
    async def run():
        manager = GradingKernelManager(sandbox=sandbox, **traits)
        if spare:
            await manager.start_for_a_later_notebook()
            await asyncio.sleep(1)  # the kernel is up before its notebook comes
            assert manager.can_take(folder)
            moving_in = await manager.move_in(folder)
        else:
            await manager.start_kernel(cwd=str(folder))
            moving_in = None
        client = manager.client()
        client.start_channels()
        outputs = []
        try:
            await client.wait_for_ready(timeout=60)
            if moving_in is not None:
                await remote_call.call(client, MOVING_IN, "take_files", 60, **moving_in)
            reply = await client.execute_interactive(textwrap.dedent(code), timeout=120,
                                                     output_hook=lambda msg: outputs.append(msg))
            assert reply["content"]["status"] == "ok", reply["content"]
        finally:
            client.stop_channels()
            await manager.shutdown_kernel(now=True)
        assert manager._sandbox is None, "the sandbox's private folder outlived its kernel"
        text = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
        return json.loads(text.strip().splitlines()[-1])
    return run_coroutine(run())


def uid_pool(uid: int) -> range:
    """The 64 uids of the grading process that gave a kernel ``uid`` (its other kernels had the others)."""
    first = uid - (uid - sandbox.private_uid_base(0)) % 64
    return range(first, first + 64)


def process_uid(pid: str) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return -1
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))


@contextlib.contextmanager
def logged_messages():
    """The messages logged meanwhile on traitlets' log: the grader's, its kernel managers' and provisioners'
    (nbgrader's applications stop it propagating to the root logger, where pytest's caplog listens)."""
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    get_logger().addHandler(handler)
    try:
        yield messages
    finally:
        get_logger().removeHandler(handler)
