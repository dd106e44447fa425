"""The client of the grading and trusted kernels: ready as soon as its kernel answers, and deaf to any
message larger than it can hold."""
from __future__ import annotations

import time
from queue import Empty

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from traitlets import Int


class ReadyKernelClient(AsyncKernelClient):
    """The client of the grading and trusted kernels: ready as soon as its kernel is.

    Every socket it connects refuses a message past ``max_message_bytes`` (ZMQ's MAXMSGSIZE: the
    connection that carried it is dropped before the message is read into the grader's memory). The
    grading kernel holds up to 3 GiB and could otherwise send the grader's worker one message of that
    size; the output cap (``output_cap``) acts only on messages already received. A submission that sends
    one loses its own kernel's messages from then on (its notebook's later cells and tests fail), no one else's.
    """

    max_message_bytes = Int(64 * 2**20, help="the largest message the grader receives from a kernel; a "
                            "larger one drops its connection unread").tag(config=True)

    def _create_connected_socket(self, channel, identity=None):
        """jupyter_client's socket, with MAXMSGSIZE set before it connects (set later, it does not hold)."""
        defaults = self.context.sockopts
        previous = defaults.get(zmq.MAXMSGSIZE)
        self.context.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        try:
            return super()._create_connected_socket(channel, identity)
        finally:
            if previous is None:
                defaults.pop(zmq.MAXMSGSIZE, None)
            else:
                self.context.setsockopt(zmq.MAXMSGSIZE, previous)

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """Wait until the kernel answers kernel_info and its iopub messages reach this client.

        What jupyter_client's ``wait_for_ready`` checks, without the 0.2 s of iopub silence it then waits
        for (twice per notebook: the grading kernel and the trusted one). The kernel's iopub status for
        the kernel_info request is the proof that iopub is connected; until it comes, ask again.
        Raises RuntimeError as jupyter_client does, with the same words when the kernel died."""
        timeout = 60.0 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            msg_id = self.kernel_info()
            reply = await _message_for(self.shell_channel, msg_id, 1.0)
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                while (status := await _message_for(self.iopub_channel, msg_id, 0.2)) is not None:
                    if status["msg_type"] == "status" and status["content"].get("execution_state") == "idle":
                        self._handle_kernel_info_reply(reply)
                        return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")


async def _message_for(channel, msg_id: str, seconds: float):
    """The next message on ``channel`` whose parent is ``msg_id`` within ``seconds`` (others are dropped), or None."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = await channel.get_msg(timeout=left)
        except Empty:
            return None
        if message.get("parent_header", {}).get("msg_id") == msg_id:
            return message
    return None
