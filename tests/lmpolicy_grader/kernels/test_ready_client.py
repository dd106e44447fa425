"""The grader's kernel client: a message past its cap never reaches the grader's memory."""
from __future__ import annotations

import asyncio
import time

import zmq
from jupyter_client.manager import AsyncKernelManager

from lmpolicy_grader.kernels.ready_client import ReadyKernelClient

CAP = 1_000_000


async def _iopub_sizes(client, code: str, seconds: float = 8.0) -> list[int]:
    """The sizes of the iopub contents the client received for ``code``, until idle or ``seconds``."""
    msg_id = client.execute(code)
    deadline, sizes = time.monotonic() + seconds, []
    while time.monotonic() < deadline:
        try:
            message = await client.get_iopub_msg(timeout=0.5)
        except Exception:
            continue
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        sizes.append(len(str(message["content"])))
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            break
    return sizes


def test_a_message_past_the_cap_is_never_received_and_one_under_it_is():
    async def run():
        manager = AsyncKernelManager()
        manager.client_class = "lmpolicy_grader.kernels.ready_client.ReadyKernelClient"
        await manager.start_kernel()
        client = manager.client(max_message_bytes=CAP)
        assert isinstance(client, ReadyKernelClient)
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            assert client.iopub_channel.socket.getsockopt(zmq.MAXMSGSIZE) == CAP
            assert client.shell_channel.socket.getsockopt(zmq.MAXMSGSIZE) == CAP
            under = await _iopub_sizes(client, "display({'text/plain': 'u' * 500_000}, raw=True)")
            over = await _iopub_sizes(client, "display({'text/plain': 'o' * 5_000_000}, raw=True)")
            return under, over, client.context.sockopts.get(zmq.MAXMSGSIZE)
        finally:
            client.stop_channels()
            await manager.shutdown_kernel(now=True)

    under, over, left_on_the_context = asyncio.run(run())
    assert max(under) > 500_000, "a message under the cap arrives whole"
    assert over and max(over) < CAP, f"a message past the cap arrived: {max(over)} bytes"
    assert left_on_the_context is None, "the cap is set on the client's sockets, not left on a shared context"
