"""The trusted test kernel, forked from the zygote: the kernel it would have been, and nothing more.

Each test starts real trusted kernels (``TrustedKernelManager``) and asks them about themselves over
the kernel protocol, as GradingExecute's tests do.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from traitlets.log import get_logger

from lmpolicy_grader.kernels import forked as forked_kernel
from lmpolicy_grader.kernels.grading_kernel import DEFAULT_MEMORY_BYTES
from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager

from ..grading_kernel import logged_messages

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here: the kernel is not forked")


def _run(coroutine):
    """Run ``coroutine`` in a thread of its own (a browser test may leave an event loop in this one)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def _start(folder: Path, forked: bool = True):
    km = TrustedKernelManager(forked=forked)
    await km.start_kernel(cwd=str(folder))
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    return km, kc


async def _value(kc, expression: str):
    """``expression`` evaluated in the kernel (JSON-able), or the kernel's error name."""
    printed = []
    reply = await kc.execute_interactive(
        f"import json as _json\nprint(_json.dumps({expression}))", timeout=60,
        output_hook=lambda message: printed.append(message["content"].get("text", "")))
    if reply["content"]["status"] != "ok":
        return reply["content"].get("ename", reply["content"]["status"])
    return json.loads("".join(printed))


async def _stop(km, kc) -> None:
    kc.stop_channels()
    await km.shutdown_kernel(now=True)


def _kernel_process(folder: Path, forked: bool = True) -> tuple[str, int]:
    """Start a trusted kernel in ``folder``: what follows its process (``ForkedProcess`` or ``Popen``) and
    the kernel's parent's pid (the zygote's, or this process's)."""
    async def scenario():
        km, kc = await _start(folder, forked)
        try:
            return type(km.provisioner.process).__name__, await _value(kc, "__import__('os').getppid()")
        finally:
            await _stop(km, kc)

    return _run(scenario())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"


def _gone_within(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_forked_kernel_has_the_limit_environment_folder_and_threads_of_its_command_line(tmp_path):
    async def scenario():
        km, kc = await _start(tmp_path)
        try:
            return km.provisioner.pid, await _value(kc, (
                "{'pid': __import__('os').getpid(), 'parent': __import__('os').getppid(), "
                "'group': __import__('os').getpgrp(), 'session': __import__('os').getsid(0), "
                "'as': __import__('resource').getrlimit(__import__('resource').RLIMIT_AS), "
                "'threads': __import__('torch').get_num_threads(), 'cwd': __import__('os').getcwd(), "
                "'execution': __import__('os').environ.get('NBGRADER_EXECUTION'), "
                "'mpl': __import__('os').environ.get('MPLBACKEND'), 'omp': __import__('os').environ.get('OMP_NUM_THREADS')}"))
        finally:
            await _stop(km, kc)

    pid, facts = _run(scenario())
    assert facts["pid"] == pid
    assert facts["parent"] == forked_kernel.ZYGOTE._process.pid != os.getpid()  # forked, not started
    assert facts["group"] == facts["session"] == pid != os.getpgrp()  # a signal to its group misses the grader
    assert facts["as"] == [DEFAULT_MEMORY_BYTES, DEFAULT_MEMORY_BYTES]
    assert facts["threads"] == 1 and facts["omp"] == "1"
    assert facts["cwd"] == str(tmp_path)
    assert (facts["execution"], facts["mpl"]) == ("autograde", "Agg")


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "not forked"])
def test_a_trusted_kernel_listens_on_sockets_in_its_folder_not_on_ports_picked_for_it(tmp_path, forked):
    """A TCP port the grader picks for a kernel is free only until the kernel binds it, and any process on
    the machine may take it meanwhile (the kernel then dies at start-up): ipc sockets cannot be taken."""
    async def scenario():
        km, kc = await _start(tmp_path, forked)
        try:
            sockets = sorted(path.name for path in tmp_path.glob(".kernel-*") if path.is_socket())
            return km.get_connection_info()["transport"], sockets, await _value(kc, "6 * 7")
        finally:
            await _stop(km, kc)

    transport, sockets, answer = _run(scenario())
    assert (transport, len(sockets), answer) == ("ipc", 5, 42)  # shell, iopub, stdin, control, heartbeat
    assert not list(tmp_path.glob(".kernel-*")), "the kernel's sockets outlived it"


def test_a_kernel_not_forked_is_started_from_its_command_line(tmp_path):
    """``c.TrustedKernelManager.forked = False``: the kernel is this process's child, as before the zygote."""
    assert _kernel_process(tmp_path, forked=False) == ("Popen", os.getpid())


def test_nothing_of_one_kernel_reaches_the_next(tmp_path):
    """What a notebook's tests change (a module's attribute, torch's generator, a builtin) is gone in the next kernel."""
    async def scenario():
        km, kc = await _start(tmp_path)
        first_draw = await _value(kc, "__import__('torch').rand(3).tolist()")
        await kc.execute_interactive("import builtins, torch, lmpolicy.notebook.checks\nlmpolicy.notebook.checks.LEFT_BEHIND = 1\n"
                                     "builtins.LEFT_BEHIND = 1\ntorch.manual_seed(5)\ntorch.rand(7)", timeout=60)
        changed = await _value(kc, "hasattr(__import__('lmpolicy.notebook.checks').notebook.checks, 'LEFT_BEHIND')")
        await _stop(km, kc)
        km, kc = await _start(tmp_path)
        try:
            return first_draw, changed, await _value(kc, (
                "[__import__('torch').rand(3).tolist(), hasattr(__import__('lmpolicy.notebook.checks').notebook.checks, 'LEFT_BEHIND'), "
                "hasattr(__import__('builtins'), 'LEFT_BEHIND')]"))
        finally:
            await _stop(km, kc)

    first_draw, changed, (next_draw, module_changed, builtin_changed) = _run(scenario())
    assert changed is True
    assert next_draw == first_draw
    assert (module_changed, builtin_changed) == (False, False)


def test_an_interrupt_reaches_the_kernel_and_a_kill_ends_it_with_what_it_started(tmp_path):
    async def scenario():
        km, kc = await _start(tmp_path)
        child = await _value(kc, "__import__('subprocess').Popen(['sleep', '300']).pid")
        started = time.monotonic()
        # not stop_on_error: ipykernel would abort what follows an error for a moment, our "1 + 1" with it
        msg_id = kc.execute("import time\ntime.sleep(60)", stop_on_error=False)
        await asyncio.sleep(0.5)
        await km.interrupt_kernel()
        reply = await kc.get_shell_msg(timeout=30)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await kc.get_shell_msg(timeout=30)
        interrupted_after = time.monotonic() - started
        pid = km.provisioner.pid
        still_answers = await _value(kc, "1 + 1")
        await _stop(km, kc)
        return reply["content"].get("ename"), interrupted_after, still_answers, pid, child

    ename, seconds, still_answers, pid, child = _run(scenario())
    assert ename == "KeyboardInterrupt" and seconds < 30
    assert still_answers == 2
    assert _gone_within([pid, child], 10), "the kernel or its child outlived the kill"


def test_a_kernel_that_ends_on_its_own_is_seen_to_have_ended(tmp_path):
    async def scenario():
        km, kc = await _start(tmp_path)
        kc.execute("import os\nos._exit(3)")
        deadline = time.monotonic() + 10
        while await km.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        alive = await km.is_alive()
        await _stop(km, kc)
        return alive

    assert _run(scenario()) is False


def test_a_zygote_that_ended_is_started_again(tmp_path):
    _, first_zygote = _kernel_process(tmp_path)
    os.kill(first_zygote, signal.SIGKILL)
    assert _gone_within([first_zygote], 10)
    _, second_zygote = _kernel_process(tmp_path)
    assert second_zygote != first_zygote and second_zygote == forked_kernel.ZYGOTE._process.pid


def test_the_zygote_and_its_kernels_end_with_the_grader_process(tmp_path):
    """A grader killed without a word (a Dask worker killed with -9) leaves no trusted kernel behind."""
    grader = textwrap.dedent(f"""
        import asyncio, json, os
        from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager
        from lmpolicy_grader.kernels import forked as forked_kernel
        async def main():
            km = TrustedKernelManager()
            await km.start_kernel(cwd={str(tmp_path)!r})
            kc = km.client(); kc.start_channels(); await kc.wait_for_ready(timeout=60)
            print(json.dumps([km.provisioner.pid, forked_kernel.ZYGOTE._process.pid]), flush=True)
            os.kill(os.getpid(), 9)
        asyncio.run(main())
        """)
    run = subprocess.run([sys.executable, "-c", grader], capture_output=True, text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stderr
    kernel, zygote = json.loads(run.stdout.strip().splitlines()[-1])
    assert _gone_within([zygote, kernel], 15), "the zygote or its kernel outlived the grader"


def test_grading_starts_the_zygote_before_its_first_trusted_kernel(tmp_path):
    """GradingExecute starts the zygote as it is made, so that its imports run beside the first notebook's
    grading kernel; the first trusted kernel is forked from that one."""
    from lmpolicy_grader.nbgrader_plugins import GradingExecute

    zygote = forked_kernel.ZYGOTE._process
    if zygote is not None:
        zygote.kill()
        zygote.wait()
    GradingExecute()
    started = forked_kernel.ZYGOTE._process
    assert started is not zygote and started.poll() is None
    # in the kernels' environment, whose one-thread settings hold for what torch reads as the zygote imports it
    assert b"OMP_NUM_THREADS=1" in _environment(started.pid)
    assert _kernel_process(tmp_path) == ("ForkedProcess", started.pid)


def _environment(pid: int, within: float = 10) -> list[bytes]:
    """The environment of process ``pid``: Popen returns once the exec has begun, and /proc shows the
    new program's environment only once the kernel has laid it out, a moment later."""
    deadline = time.monotonic() + within
    while not (environ := Path(f"/proc/{pid}/environ").read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return environ.split(b"\0")


def test_a_fork_of_the_grader_forks_its_kernels_from_a_zygote_of_its_own(tmp_path):
    """A process forked from a grader that has a zygote (a pool's worker) does not share the zygote's socket
    with its parent, where their requests and replies would cross: it starts its own (the parent's zygote
    is not its child, so to it that zygote has ended)."""
    grader = textwrap.dedent(f"""
        import asyncio, json, os
        from lmpolicy_grader.kernels.trusted_kernel import TrustedKernelManager
        async def kernels_parent():
            km = TrustedKernelManager()
            await km.start_kernel(cwd={str(tmp_path)!r})
            kc = km.client(); kc.start_channels(); await kc.wait_for_ready(timeout=60)
            reply = await kc.execute_interactive("import os; print(os.getppid())", timeout=60,
                                                 output_hook=lambda m: printed.append(m["content"].get("text", "")))
            kc.stop_channels(); await km.shutdown_kernel(now=True)
            return int("".join(printed))
        printed = []
        before = asyncio.run(kernels_parent())
        child = os.fork()
        printed = []
        ours = asyncio.run(kernels_parent())
        print(json.dumps({{"who": "child" if child == 0 else "parent", "before": before, "now": ours}}), flush=True)
        if child:
            os.waitpid(child, 0)
        else:
            os._exit(0)
        """)
    run = subprocess.run([sys.executable, "-c", grader], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    lines = {line["who"]: line for line in map(json.loads, (line for line in run.stdout.splitlines()
                                                                if line.startswith('{"who"')))}
    assert lines["parent"]["now"] == lines["parent"]["before"] == lines["child"]["before"]
    assert lines["child"]["now"] != lines["parent"]["now"]


def test_a_zygote_that_cannot_fork_costs_speed_not_the_notebook(tmp_path, monkeypatch):
    """A zygote that ends before it answers leaves the kernel to start from its command line, with a
    warning that says so."""
    broken = forked_kernel.Zygote()
    monkeypatch.setattr(broken, "_start", lambda env: _start_a_zygote_that_ends(broken))
    monkeypatch.setattr(forked_kernel, "ZYGOTE", broken)

    with logged_messages() as warnings:
        assert _kernel_process(tmp_path) == ("Popen", os.getpid())
    assert any("zygote of the trusted test kernels ended (exit status 3" in warning
               and "starts from its command line instead" in warning for warning in warnings), warnings


def _start_a_zygote_that_ends(zygote) -> None:
    ours, its = socket.socketpair()
    zygote._process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    its.close()
    zygote._socket, zygote._replies = ours, ours.makefile("r")


def test_without_the_provisioner_installed_the_kernel_starts_from_its_command_line(tmp_path, monkeypatch):
    """A course run from a checkout that pip never installed has no ``lmpolicy-forked`` entry point: its
    trusted kernels start as before, and grading says once why, instead of failing every notebook."""
    from lmpolicy_grader.kernels import grading_kernel, trusted_kernel

    monkeypatch.setattr(trusted_kernel, "provisioner_installed", lambda: False)
    monkeypatch.setattr(grading_kernel, "_warned", set())

    with logged_messages() as warnings:
        assert _kernel_process(tmp_path) == ("Popen", os.getpid())
    assert [w for w in warnings if "kernel provisioner is not installed" in w and "pip install -e ." in w]
    assert forked_kernel.provisioner_installed()  # here it is: `make install` registered it


def test_a_kernel_that_ends_between_the_look_and_the_signal_is_signalled_without_an_error():
    """The kernel's process is reaped the moment it ends (the zygote ignores SIGCHLD), so it can end after
    ``poll`` saw it running and before the signal: a grading under load once failed an honest notebook there
    with ProcessLookupError, out of the sandbox's poll."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    process = forked_kernel.ForkedProcess(child.pid)
    child.wait()  # ended and reaped: its pidfd now names no process
    process.poll = lambda: None  # what poll said an instant before the end
    process.send_signal(signal.SIGKILL)
    process.terminate()
    del process.poll
    assert process.poll() == forked_kernel.ENDED

    sandbox = subprocess.Popen([sys.executable, "-c", "pass"])
    sandbox.wait()
    kernel = forked_kernel.ForkedProcess(subprocess.Popen([sys.executable, "-c", "pass"]).pid)
    os.waitpid(kernel.pid, 0)
    kernel_polls = iter([None])  # running at the first look, ended after
    kernel.poll = lambda: next(kernel_polls, forked_kernel.ENDED)
    assert forked_kernel.SandboxedForkedProcess(sandbox, kernel).poll() == forked_kernel.ENDED
