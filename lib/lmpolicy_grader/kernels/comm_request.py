"""A request to a kernel over a comm, and its answer: the one form every call into a kernel takes.

The grader calls into kernels for two jobs, each with its own transport. ``kernels.remote_call`` calls the
grader's own code in a kernel (``moving_in``, the trusted kernel's ``in_kernel``): one comm per call, JSON in
and out, from the grader's asynchronous client. ``trusted_tests.channel`` is the trusted kernel's one comm to the
submission's kernel: many requests on it, values in ``trusted_tests.codec``'s safe form with raw buffers, a
heartbeat and an interrupt, because its other end runs the submission and may hang, die or answer nonsense.
Both frame a request and its answer here, and both servers answer through ``answered``:

- a request is ``{"id": n, "op": name, ...its fields}``;
- its answer is ``{"id": n, ...the operation's reply}``, or ``{"id": n, "failed": "<type>: <message>"}``
  when the operation raised or there is none of that name;
- the answer is the ``comm_msg`` on the request's comm that carries the request's ``id``.
"""
from __future__ import annotations

from typing import Callable

FAILED = "failed"
MAX_FAILURE_CHARS = 500


class NotAnAnswer(Exception):
    """A message on the request's comm, in reply to it, that is not a well-formed answer to it."""


def request(request_id: int, op: str, **fields) -> dict:
    return {"id": request_id, "op": op, **fields}


def answered(data: dict, run: Callable[[dict], dict]) -> dict:
    """The answer to request ``data``: ``run(data)``'s reply, or what it raised as ``failed``."""
    try:
        reply = run(data)
    except BaseException as error:  # noqa: BLE001 - every failure becomes the answer, named for the caller
        reply = {FAILED: f"{type(error).__name__}: {error}"[:MAX_FAILURE_CHARS]}
    return {"id": data.get("id"), **reply}


def answer_in(message: dict, comm_id: str, request_id: int, parent_msg_id: str | None = None) -> dict | None:
    """The answer ``message`` carries to request ``request_id`` on comm ``comm_id`` (None: it carries none).
    With ``parent_msg_id``, only a reply to that message counts, and one that is not a well-formed answer
    raises ``NotAnAnswer``."""
    content = message.get("content") or {}
    if message.get("msg_type") != "comm_msg" or content.get("comm_id") != comm_id:
        return None
    if parent_msg_id is not None and (message.get("parent_header") or {}).get("msg_id") != parent_msg_id:
        return None
    data = content.get("data")
    if isinstance(data, dict) and data.get("id") == request_id:
        return data
    if parent_msg_id is not None:
        raise NotAnAnswer(f"a reply on comm {comm_id} that is not the answer to request {request_id}")
    return None
