"""kernels.remote_call: a function inside a real kernel, called by name with data, and its failures named."""
from __future__ import annotations

import os
import sys

import pytest
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpec

from lmpolicy_grader.kernels import remote_call
from lmpolicy_grader.kernels.moving_in import TARGET as MOVING_IN

from ...own_thread import run_coroutine

DEMO = "lmpolicy_grader_test_remote_call"  # a comm target the test registers itself
SERVE_DEMO = (f"from lmpolicy_grader.kernels import remote_call\n"
              f"remote_call.serve(get_ipython(), {DEMO!r}, {{'add': lambda a, b: a + b, "
              f"'fail': lambda: 1 / 0, 'stop': lambda: __import__('os')._exit(3)}})")


class _Kernel(AsyncKernelManager):
    """A plain ipykernel of this Python that loads moving_in, as the grading kernel does."""

    @property
    def kernel_spec(self):
        return KernelSpec(resource_dir="", display_name="test", language="python",
                          argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                "--ext=lmpolicy_grader.kernels.moving_in", "--IPKernelApp.log_level=ERROR"])


async def _session(tmp_path, body):
    km = _Kernel()
    await km.start_kernel(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        await kc.execute_interactive(SERVE_DEMO, timeout=60)
        return await body(kc)
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


def test_an_operation_runs_in_the_kernel_with_its_arguments_and_returns_its_value(tmp_path):
    async def body(kc):
        return await remote_call.call(kc, DEMO, "add", 30, a=40, b=2)
    assert run_coroutine(_session(tmp_path, body)) == 42


def test_moving_in_takes_the_notebooks_folder(tmp_path):
    folder = tmp_path / "notebook"
    folder.mkdir()

    async def body(kc):
        await remote_call.call(kc, MOVING_IN, "take_files", 30, folder=str(folder))
        reply = await kc.execute_interactive("import os; print(os.getcwd())", timeout=30,
                                             output_hook=lambda msg: printed.append(msg["content"].get("text", "")))
        return reply
    printed: list[str] = []
    run_coroutine(_session(tmp_path, body))
    assert "".join(printed).strip() == os.path.realpath(folder)


@pytest.mark.parametrize("operation, says", [("fail", "fail raised ZeroDivisionError: division by zero"),
                                             ("nothing_of_that_name", "no operation 'nothing_of_that_name'"),
                                             ("stop", "the kernel died during stop")])
def test_a_failure_in_the_kernel_is_named_with_its_operation(tmp_path, operation, says):
    async def body(kc):
        with pytest.raises(remote_call.RemoteCallFailed) as failed:
            await remote_call.call(kc, DEMO, operation, 30)
        return str(failed.value)
    assert says in run_coroutine(_session(tmp_path, body))


def test_a_kernel_that_does_not_answer_in_time_is_named(tmp_path):
    async def body(kc):
        kc.execute("import time; time.sleep(30)")  # busy: the comm waits behind the cell
        with pytest.raises(remote_call.RemoteCallFailed) as failed:
            await remote_call.call(kc, DEMO, "add", 2, a=1, b=1)
        return str(failed.value)
    assert "did not answer add within 2 s" in run_coroutine(_session(tmp_path, body))
