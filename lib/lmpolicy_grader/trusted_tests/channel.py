"""The trusted kernel's connection to the submission's kernel: one comm, answered by ``call_server``.

Its requests and answers take the form of every call into a kernel (``kernels.comm_request``); its transport
is its own, not ``kernels.remote_call``'s, because its other end runs the submission: one comm kept open for
the notebook's many calls, values in ``codec``'s safe form with raw buffers, a heartbeat, an interrupt and a
deadline per cell.

Every failure of the submission's side (an exception, a hang, a reply that cannot be decoded, a kernel
that died or never answers) surfaces as an exception of the call, so the test cell that made it fails
with a reason; nothing the submission sends is executed or unpickled here.
"""
from __future__ import annotations

import builtins
import itertools
import keyword
import time
import uuid
from queue import Empty

from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.session import Session

from lmpolicy.notebook import checks, forbidden
from lmpolicy_grader.incidents import WHY_A_KERNEL_DIES
from lmpolicy_grader.kernels import comm_request
from lmpolicy_grader.trusted_tests import codec, no_credit
from lmpolicy_grader.trusted_tests.call_server import TARGET
from lmpolicy_grader.trusted_tests.errors import CallTimedOut, ChannelError, InputChanged, submission_exception
from lmpolicy_grader.trusted_tests.proxies import (SubmissionFunction, Unreadable, advance_generators, changed_input,
                                                   through_submission)

HANDSHAKE_SECONDS = 10
INTERRUPT_GRACE_SECONDS = 10
HEARTBEAT_EVERY = 2.0
UNENCODABLE = ("it gave the grader a value which the grader cannot read: return tensors, arrays, numbers, strings, "
               "or lists, tuples and dicts of these")


class Channel:
    """One comm to the submission's kernel, over jupyter_client's blocking client of that kernel."""

    def __init__(self, info: dict, deadline_seconds: float):
        self.deadline_seconds = deadline_seconds
        self.deadline = time.monotonic() + deadline_seconds
        self.broken: str | None = None
        self.client = BlockingKernelClient(session=Session(username="lmpolicy-trusted-tests"))
        self.client.load_connection_info(info)
        self.client.start_channels(shell=True, iopub=True, stdin=False, hb=True, control=True)
        self.client.hb_channel.time_to_dead = HEARTBEAT_EVERY
        self.comm_id = uuid.uuid4().hex
        self.ids = itertools.count(1)
        self.client.session.send(self.client.shell_channel.socket, "comm_open",
                                 {"comm_id": self.comm_id, "target_name": TARGET, "data": {}})
        self._handshake()

    def _handshake(self) -> None:
        """Until the iopub subscription is in place, replies are lost: ask until one comes back."""
        give_up = time.monotonic() + HANDSHAKE_SECONDS
        while time.monotonic() < give_up:
            request = self._send({"op": "hello"}, [])
            try:
                self._wait(request, time.monotonic() + 1.0, interrupt=False)
                return
            except CallTimedOut:
                continue
        self.broken = f"the submission's kernel did not answer the grader's channel within {HANDSHAKE_SECONDS} s"

    def new_cell(self) -> None:
        self.deadline = time.monotonic() + self.deadline_seconds

    def _send(self, data: dict, buffers: list[bytes]) -> dict:
        request = comm_request.request(next(self.ids), **data)
        msg = self.client.session.send(self.client.shell_channel.socket, "comm_msg",
                                       {"comm_id": self.comm_id, "data": request}, buffers=buffers)
        return {"id": request["id"], "op": data["op"], "msg_id": msg["header"]["msg_id"]}

    def _receive(self, timeout: float):
        try:
            return self.client.get_iopub_msg(timeout=max(0.0, timeout))
        except Empty:
            return None
        except Exception:  # noqa: BLE001 - a message that does not parse (or is not signed) is not an answer
            return None

    def _alive(self) -> bool:
        """Does the kernel's heartbeat answer (three chances, so that one beat missed on a busy machine is not a death)?"""
        for _ in range(3):
            if self.client.hb_channel.is_beating():
                return True
            time.sleep(HEARTBEAT_EVERY)
        return False

    def _wait(self, request: dict, until: float, interrupt: bool = True) -> tuple[dict, list]:
        next_beat = time.monotonic() + HEARTBEAT_EVERY
        while True:
            now = time.monotonic()
            if now >= until:
                if interrupt:
                    return self._interrupt(request)
                raise CallTimedOut("no answer")
            msg = self._receive(min(until, next_beat) - now)
            if msg is None:
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + HEARTBEAT_EVERY
                    if not self._alive():
                        self.broken = f"the submission's kernel died ({WHY_A_KERNEL_DIES})"
                        raise ChannelError(self.broken)
                continue
            try:
                data = comm_request.answer_in(msg, self.comm_id, request["id"], request["msg_id"])
            except comm_request.NotAnAnswer:
                raise ChannelError("the submission's kernel answered with something that is not an answer") from None
            if data is not None:
                return data, msg.get("buffers") or []

    def _interrupt(self, request: dict):
        self.client.control_channel.send(self.client.session.msg("interrupt_request", {}))
        try:
            self._wait(request, time.monotonic() + INTERRUPT_GRACE_SECONDS, interrupt=False)
        except CallTimedOut:
            self.broken = "the submission's kernel stopped answering the grader's channel (even when interrupted)"
            if request["op"] != "call":
                raise CallTimedOut(self.broken) from None
        if request["op"] != "call":
            raise CallTimedOut(f"the submission's kernel did not answer the grader's channel within "
                               f"{self.deadline_seconds:.0f} s")
        raise CallTimedOut(f"it did not return within the cell's {self.deadline_seconds:.0f} s and was interrupted")

    def request(self, data: dict, buffers: list[bytes]) -> tuple[dict, list]:
        if self.broken:
            raise ChannelError(self.broken)
        reply, reply_buffers = self._wait(self._send(data, buffers), self.deadline)
        if comm_request.FAILED in reply:  # its words are the submission's process's, so they choose between the grader's only
            if str(reply[comm_request.FAILED]).startswith(f"{codec.NotEncodable.__name__}:"):
                raise ChannelError(UNENCODABLE)
            raise ChannelError("the submission's side of the channel failed")
        return reply, reply_buffers

    # --- operations ------------------------------------------------------------------------------

    def namespace(self, skip, mentioned=()) -> dict:
        reply, buffers = self.request({"op": "namespace", "skip": sorted(skip), "mentioned": sorted(mentioned)}, [])
        names, decoder = reply.get("names"), codec.Decoder(buffers)
        if not isinstance(names, dict):
            raise ChannelError("the submission's kernel sent no namespace")
        found = {}
        for name, entry in names.items():
            if not (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)) \
                    or name.startswith("_") or name in skip or hasattr(builtins, name) or not isinstance(entry, dict):
                continue
            if entry.get("kind") == "function":
                found[name] = SubmissionFunction(self, name)
            elif entry.get("kind") == "value":
                try:
                    found[name] = decoder.decode(entry.get("value"))
                except codec.NotDecodable:
                    found[name] = Unreadable(name, "its value could not be read")  # the codec's words quote the submission
            else:
                found[name] = Unreadable(name, "outside what the grader can read")  # not the submission's words
        return found

    def call(self, name: str, args: tuple, kwargs: dict, count: str | None = None):
        """``name(*args, **kwargs)`` in the submission's process; with ``count``, (result, how many
        times it called the submission's function ``count``)."""
        blocked = checks.active_blocks()
        if blocked:
            # the active exercises' declared names and patterns (lmpolicy.notebook.forbidden), the submission's names a
            # pattern matches, and any function a test blocks by itself
            names = forbidden.rule_names(no_credit.SOURCES) | {no_credit.leaf(fn) for fn in blocked}
            reason = no_credit.library_shortcut(no_credit.SOURCES, name, names)
            if reason:
                raise checks.LibraryShortcutUsed(f"implement this yourself: {reason}")
        encoder = codec.Encoder()
        arguments = [encoder.encode(list(args), "the arguments"), encoder.encode(dict(kwargs), "the arguments")]
        # torch's operators that compute an active exercise's quantity refuse there too, whatever path reaches them
        refuse = [list(entry) for entry in forbidden.active_operators()]
        reply, buffers = self.request({"op": "call", "name": name, "args": arguments[0], "kwargs": arguments[1],
                                       "count": count, "refuse_operators": refuse}, encoder.buffers)
        if "missing" in reply:
            raise NameError(f"{name} is no longer a function in your notebook")
        if "raised" in reply:  # what crosses is the exception's kind, never its words (errors.submission_exception)
            raised = reply["raised"] if isinstance(reply["raised"], dict) else {}
            if raised.get("shortcut"):
                computed = " or ".join(what for _, what in refuse)
                raise checks.LibraryShortcutUsed("it calls a library function that is not available while grading"
                                                 + (f", or one of torch's that computes {computed}" if computed else "")
                                                 + ": write that part yourself")
            if raised.get("type") == "KeyboardInterrupt":
                raise CallTimedOut("it was interrupted")
            raise submission_exception(raised.get("type"))
        decoder = codec.Decoder(buffers)
        try:
            result = decoder.decode(reply.get("result"))
            args_after, kwargs_after = decoder.decode(reply.get("args")), decoder.decode(reply.get("kwargs"))
        except codec.NotDecodable:
            raise ChannelError("what it returned could not be read") from None  # the codec's words quote the submission
        changed = changed_input(list(args), args_after, "args") or changed_input(dict(kwargs), kwargs_after, "kwargs")
        if changed:
            raise InputChanged(f"{name} changed an input it was given ({changed}) in place: it must leave its "
                               "inputs as it found them and return what it computes")
        advance_generators(list(args), args_after)
        advance_generators(dict(kwargs), kwargs_after)
        graph = reply.get("graph")
        if type(graph) is int:
            inputs = [t for t in codec.tensors_in((list(args), kwargs)) if t.requires_grad]
            result = through_submission(self, graph, inputs, result)
        if count is not None:
            counted = reply.get("counted")
            return result, counted if type(counted) is int and counted >= 0 else 0
        return result

    def vjp(self, graph: int, grads: list) -> list:
        encoder = codec.Encoder()
        header = encoder.encode([None if g is None else g.detach() for g in grads], "the gradients")
        reply, buffers = self.request({"op": "vjp", "graph": graph, "grads": header}, encoder.buffers)
        try:
            found = codec.Decoder(buffers).decode(reply.get("grads"))
        except codec.NotDecodable:
            raise ChannelError("the gradient through your function could not be read") from None
        if not isinstance(found, list):
            raise ChannelError("the gradient through your function is not a list")
        return found
