"""A function inside a kernel, called by name with data for arguments: never code sent as text.

The kernel side (``serve``, from an IPython extension the kernel loads at start) registers a comm
target with a table of operations. The grader side (``call``) opens a comm to that target whose data is
the request (``kernels.comm_request``: the operation's name, its arguments as JSON); the kernel answers
on the same comm with ``{"result": ...}`` or what failed, and closes it. The trusted tests' channel to the
submission's kernel frames its requests alike; it is a transport of its own (``trusted_tests.channel``).
"""
from __future__ import annotations

import time
import uuid
from queue import Empty
from typing import Callable

from jupyter_core.utils import ensure_async

from lmpolicy_grader.kernels import comm_request


class RemoteCallFailed(Exception):
    """The operation raised in the kernel, or the kernel did not answer (the message says which)."""


def serve(shell, target: str, operations: dict[str, Callable]) -> None:
    """In the kernel: answer ``call``s of ``operations`` on the comm target ``target``."""
    def run(request: dict) -> dict:
        operation = operations.get(request.get("op"))
        if operation is None:
            raise LookupError(f"no operation {request.get('op')!r} on {target}")
        return {"result": operation(**(request.get("arguments") or {}))}

    def opened(comm, message) -> None:
        comm.send(comm_request.answered(message["content"].get("data") or {}, run))
        comm.close()
    shell.kernel.comm_manager.register_target(target, opened)


async def call(client, target: str, operation: str, seconds: float, **arguments):
    """``operation(**arguments)`` in the kernel of ``client`` (an asynchronous kernel client), within ``seconds``."""
    comm_id = uuid.uuid4().hex
    client.shell_channel.send(client.session.msg("comm_open", {
        "comm_id": comm_id, "target_name": target, "data": comm_request.request(1, operation, arguments=arguments)}))
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = await client.iopub_channel.get_msg(timeout=min(left, 1.0))
        except Empty:
            if not await ensure_async(client.is_alive()):
                raise RemoteCallFailed(f"the kernel died during {operation}") from None
            continue
        answer = comm_request.answer_in(message, comm_id, 1)
        if answer is not None:
            if comm_request.FAILED in answer:
                raise RemoteCallFailed(f"{operation} raised {answer[comm_request.FAILED]}")
            return answer.get("result")
    raise RemoteCallFailed(f"the kernel did not answer {operation} within {seconds:.0f} s")
