"""A function inside a kernel, called by name with data for arguments: never code sent as text.

The kernel side (``serve``, from an IPython extension the kernel loads at start) registers a comm
target with a table of operations. The grader side (``call``) opens a comm to that target whose data
names the operation and its arguments (JSON); the kernel answers on the same comm with the result or
the error, and closes it.
"""
from __future__ import annotations

import time
import uuid
from queue import Empty
from typing import Callable

from jupyter_core.utils import ensure_async


class RemoteCallFailed(Exception):
    """The operation raised in the kernel, or the kernel did not answer (the message says which)."""


def serve(shell, target: str, operations: dict[str, Callable]) -> None:
    """In the kernel: answer ``call``s of ``operations`` on the comm target ``target``."""
    def opened(comm, message) -> None:
        request = message["content"].get("data") or {}
        operation = operations.get(request.get("op"))
        try:
            if operation is None:
                raise LookupError(f"no operation {request.get('op')!r} on {target}")
            comm.send({"result": operation(**(request.get("arguments") or {}))})
        except Exception as error:  # noqa: BLE001 - the grader reports it with the operation's name
            comm.send({"error": f"{type(error).__name__}: {error}"})
        comm.close()
    shell.kernel.comm_manager.register_target(target, opened)


async def call(client, target: str, operation: str, seconds: float, **arguments):
    """``operation(**arguments)`` in the kernel of ``client`` (an asynchronous kernel client), within ``seconds``."""
    comm_id = uuid.uuid4().hex
    client.shell_channel.send(client.session.msg("comm_open", {
        "comm_id": comm_id, "target_name": target, "data": {"op": operation, "arguments": arguments}}))
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = await client.iopub_channel.get_msg(timeout=min(left, 1.0))
        except Empty:
            if not await ensure_async(client.is_alive()):
                raise RemoteCallFailed(f"the kernel died during {operation}") from None
            continue
        content = message.get("content") or {}
        if message.get("msg_type") == "comm_msg" and content.get("comm_id") == comm_id:
            answer = content.get("data") or {}
            if "error" in answer:
                raise RemoteCallFailed(f"{operation} raised {answer['error']}")
            return answer.get("result")
    raise RemoteCallFailed(f"the kernel did not answer {operation} within {seconds:.0f} s")
