"""The trusted test process's side of the channel: the submission's names as proxies and values.

The grader runs a notebook's test cells in a kernel of their own (unsandboxed: it runs only the
instructor's code) and its other cells in the sandboxed grading kernel. Before each test cell,
``bind`` fetches the submission's names over the channel (``call_server.py`` answers) into this
kernel's namespace, never over a name the trusted cells defined:

- a function becomes a ``SubmissionFunction``: calling it sends the arguments in the safe form of
  ``channel.py``, runs the function in the submission's process and returns the decoded result;
  the arguments are updated in place as the call left them (values, ``requires_grad``, a
  generator's state), and a result that carries a gradient back to an argument differentiates
  through the submission's process (``backward`` asks it for the vector-Jacobian product);
- any other value is decoded from the safe form (``Unreadable`` when it is outside it).

Every failure of the submission's side (an exception, a hang, a reply that cannot be decoded, a
kernel that died or never answers) surfaces as an exception of the call, so the test cell that
made it fails with a reason; nothing the submission sends is executed or unpickled here.

The no-credit rule for calling the course's own implementation holds on trusted data: under
``checks.no_library_shortcut`` a call fails when the submission's source (the notebook the grader
holds, not the kernel's word) reaches a blocked function from the called function, by name, alias,
import or a copied ``__code__``; the submission's process also blocks those functions during the
call and reports a function that runs a library function's code object.
"""
from __future__ import annotations

import ast
import builtins
import itertools
import keyword
import re
import sys
import time
import types
import uuid

import numpy as np
import torch
import zmq
from IPython import get_ipython
from jupyter_client.session import Session

from lmpolicy import checks
from lmpolicy_grader import channel
from lmpolicy_grader.call_server import TARGET

HANDSHAKE_SECONDS = 10
INTERRUPT_GRACE_SECONDS = 10
HEARTBEAT_EVERY = 2.0


class ChannelError(Exception):
    """The submission's side of the channel did not give a usable answer (the message says how)."""

    remote_frames: list[str] = []  # no frames of the grader's own shown as the student's


class CallTimedOut(ChannelError):
    """The submission's function did not return within the cell's time."""


class SubmissionRaised(Exception):
    """Base of the exceptions that stand for one the submission's function raised (same class name)."""

    remote_frames: list[str] = []


_RAISED_CLASSES: dict[str, type] = {}


def _raised(kind: str, message: str, frames: list[str]) -> Exception:
    if kind == "NotImplementedError":
        return NotImplementedError(message)
    name = kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 60 else "Exception"
    cls = _RAISED_CLASSES.setdefault(name, type(name, (SubmissionRaised,), {"__module__": "submission"}))
    error = cls(message)
    error.remote_frames = [str(line)[:200] for line in frames[:checks.MAX_STUDENT_FRAMES]] if isinstance(frames, list) else []
    return error


class Unreadable:
    """A value of the submission that is outside the safe form (stands in for it in the tests)."""

    def __init__(self, name: str, why: str):
        self.name, self.why = name, why

    def __repr__(self) -> str:
        return f"<{self.name}: {self.why}>"


# --- the channel -----------------------------------------------------------------------------------

class Channel:
    """One comm to the submission's kernel, over the kernel's own ZMQ sockets."""

    def __init__(self, info: dict, deadline_seconds: float):
        self.info = info
        self.deadline_seconds = deadline_seconds
        self.deadline = time.monotonic() + deadline_seconds
        self.broken: str | None = None
        self.session = Session(key=info["key"].encode(), signature_scheme=info.get("signature_scheme", "hmac-sha256"),
                               username="lmpolicy-trusted-tests")
        self.context = zmq.Context()
        self.shell = self._socket(zmq.DEALER, "shell_port")
        self.control = self._socket(zmq.DEALER, "control_port")
        self.iopub = self._socket(zmq.SUB, "iopub_port")
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.comm_id = uuid.uuid4().hex
        self.ids = itertools.count(1)
        self.session.send(self.shell, "comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": {}})
        self._handshake()

    def _url(self, port_key: str) -> str:
        if self.info["transport"] == "ipc":
            return f"ipc://{self.info['ip']}-{self.info[port_key]}"
        return f"tcp://{self.info['ip']}:{self.info[port_key]}"

    def _socket(self, kind, port_key: str):
        sock = self.context.socket(kind)
        sock.linger = 0
        sock.connect(self._url(port_key))
        return sock

    def _handshake(self) -> None:
        """Until the SUB socket is subscribed, replies are lost: ask until one comes back."""
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
        request = {"id": next(self.ids), **data}
        msg = self.session.send(self.shell, "comm_msg", {"comm_id": self.comm_id, "data": request}, buffers=buffers)
        return {"id": request["id"], "op": data["op"], "msg_id": msg["header"]["msg_id"]}

    def _receive(self, timeout: float):
        if not self.iopub.poll(max(0, int(timeout * 1000))):
            return None
        _, parts = self.session.feed_identities(self.iopub.recv_multipart(copy=True), copy=True)
        try:
            return self.session.deserialize(parts, content=True, copy=True)
        except Exception:  # noqa: BLE001 - a message that does not parse (or is not signed) is not an answer
            return None

    def _alive(self) -> bool:
        sock = self._socket(zmq.REQ, "hb_port")
        try:
            sock.send(b"ping")
            return bool(sock.poll(1000))
        finally:
            sock.close()

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
                        self.broken = "the submission's kernel died (os._exit, a crash, or the memory/CPU limit)"
                        raise ChannelError(self.broken)
                continue
            content = msg.get("content") or {}
            if (msg.get("msg_type") == "comm_msg" and content.get("comm_id") == self.comm_id
                    and msg.get("parent_header", {}).get("msg_id") == request["msg_id"]):
                data = content.get("data")
                if not isinstance(data, dict) or data.get("id") != request["id"]:
                    raise ChannelError("the submission's kernel answered with something that is not an answer")
                return data, msg.get("buffers") or []

    def _interrupt(self, request: dict):
        self.session.send(self.control, "interrupt_request", {})
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
        if "failed" in reply:
            raise ChannelError(f"the submission's side of the channel failed: {str(reply['failed'])[:300]}")
        return reply, reply_buffers

    # --- operations ------------------------------------------------------------------------------

    def namespace(self, skip, mentioned=()) -> dict:
        reply, buffers = self.request({"op": "namespace", "skip": sorted(skip), "mentioned": sorted(mentioned)}, [])
        names, decoder = reply.get("names"), channel.Decoder(buffers)
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
                except channel.NotDecodable as error:
                    found[name] = Unreadable(name, f"its value could not be read ({error})")
            else:
                found[name] = Unreadable(name, str(entry.get("why", "outside what the grader can read"))[:300])
        return found

    def call(self, name: str, args: tuple, kwargs: dict, count: str | None = None):
        """``name(*args, **kwargs)`` in the submission's process; with ``count``, (result, how many
        times it called the submission's function ``count``)."""
        blocked = checks.active_blocks()
        if blocked:
            reason = library_shortcut(SOURCES, name, {_leaf(fn) for fn in blocked})
            if reason:
                raise checks.LibraryShortcutUsed(f"implement this yourself: {reason}, which gets no credit")
        encoder = channel.Encoder()
        arguments = [encoder.encode(list(args), "the arguments"), encoder.encode(dict(kwargs), "the arguments")]
        reply, buffers = self.request({"op": "call", "name": name, "args": arguments[0], "kwargs": arguments[1],
                                       "blocked": [_address(fn) for fn in blocked], "count": count}, encoder.buffers)
        if "missing" in reply:
            raise NameError(f"{name} is no longer a function in your notebook")
        if "copied" in reply:
            raise checks.LibraryShortcutUsed(f"implement this yourself: {name} runs the code of "
                                             f"{str(reply['copied'])[:100]}, which gets no credit")
        if "raised" in reply:
            raised = reply["raised"] if isinstance(reply["raised"], dict) else {}
            message = str(raised.get("message", ""))[:1000]
            if raised.get("shortcut"):
                raise checks.LibraryShortcutUsed(message.splitlines()[0] if message else "a library shortcut")
            if raised.get("type") == "KeyboardInterrupt":
                raise CallTimedOut("it was interrupted")
            raise _raised(raised.get("type"), message, raised.get("frames") or [])
        decoder = channel.Decoder(buffers)
        try:
            result = decoder.decode(reply.get("result"))
            args_after, kwargs_after = decoder.decode(reply.get("args")), decoder.decode(reply.get("kwargs"))
        except channel.NotDecodable as error:
            raise ChannelError(f"what it returned could not be read ({error})") from None
        _write_back(list(args), args_after)
        _write_back(kwargs, kwargs_after)
        graph = reply.get("graph")
        if type(graph) is int:
            inputs = [t for t in channel.tensors_in((list(args), kwargs)) if t.requires_grad]
            result = _through_submission(self, graph, inputs, result)
        if count is not None:
            counted = reply.get("counted")
            return result, counted if type(counted) is int and counted >= 0 else 0
        return result

    def vjp(self, graph: int, grads: list) -> list:
        encoder = channel.Encoder()
        header = encoder.encode([None if g is None else g.detach() for g in grads], "the gradients")
        reply, buffers = self.request({"op": "vjp", "graph": graph, "grads": header}, encoder.buffers)
        try:
            found = channel.Decoder(buffers).decode(reply.get("grads"))
        except channel.NotDecodable as error:
            raise ChannelError(f"the gradient through your function could not be read ({error})") from None
        if not isinstance(found, list):
            raise ChannelError("the gradient through your function is not a list")
        return found


class SubmissionFunction:
    """A function of the submission: calling it runs it in the submission's process."""

    def __init__(self, connection: Channel, name: str):
        self._channel, self.__name__, self.__qualname__ = connection, name, name

    def __call__(self, *args, **kwargs):
        return self._channel.call(self.__name__, args, kwargs)

    def counting_calls_of(self, callee: str):
        """This function, returning (result, its calls of ``callee``) (``checks.call_counting``)."""
        def counting(*args, **kwargs):
            return self._channel.call(self.__name__, args, kwargs, count=callee)
        counting.__name__ = counting.__qualname__ = self.__name__
        return counting

    def __repr__(self) -> str:
        return f"<your function {self.__name__}>"


# --- arguments as the call left them; gradients through the submission --------------------------------

def _write_back(original, after) -> None:
    """Make ``original`` (an argument the tests passed) what the call left in the submission's copy."""
    if isinstance(original, torch.Tensor) and isinstance(after, torch.Tensor):
        if after.dtype == original.dtype and after.shape == original.shape:
            same = torch.equal(original.detach(), after.detach()) or (
                original.is_floating_point() and torch.equal(original.detach().isnan(), after.isnan())
                and torch.equal(original.detach().nan_to_num(), after.detach().nan_to_num()))
            if not same:
                with torch.no_grad():
                    original.copy_(after)
        else:
            original.data = after.detach()
        if original.is_leaf and original.requires_grad != after.requires_grad:
            original.requires_grad_(after.requires_grad)
    elif isinstance(original, torch.Generator) and isinstance(after, torch.Generator):
        original.set_state(after.get_state())
    elif isinstance(original, np.ndarray) and isinstance(after, np.ndarray):
        if original.flags.writeable and after.shape == original.shape and not np.array_equal(original, after, equal_nan=True):
            np.copyto(original, after, casting="unsafe")
    elif type(original) is list and type(after) is list:
        if len(original) == len(after):
            for mine, theirs in zip(original, after):
                _write_back(mine, theirs)
        for i, (mine, theirs) in enumerate(zip(original, after)):
            if not isinstance(mine, (torch.Tensor, torch.Generator, np.ndarray, list, dict)) and mine != theirs:
                original[i] = theirs
        if len(original) != len(after):
            original[:] = after
    elif type(original) is tuple and type(after) is tuple:
        for mine, theirs in zip(original, after):
            _write_back(mine, theirs)
    elif type(original) is dict and type(after) is dict:
        for key in list(original):
            if key not in after:
                del original[key]
        for key, theirs in after.items():
            if key in original and isinstance(original[key], (torch.Tensor, torch.Generator, np.ndarray, list, dict)):
                _write_back(original[key], theirs)
            else:
                original[key] = theirs


class _ThroughSubmission(torch.autograd.Function):
    """Outputs computed in the submission's process; backward asks it for the vector-Jacobian product."""

    @staticmethod
    def forward(ctx, connection, graph, n_inputs, *inputs_then_outputs):
        ctx.connection, ctx.graph, ctx.n_inputs = connection, graph, n_inputs
        ctx.input_meta = [(t.shape, t.dtype) for t in inputs_then_outputs[:n_inputs]]
        return tuple(o.detach().clone() for o in inputs_then_outputs[n_inputs:])

    @staticmethod
    def backward(ctx, *grads):
        found = ctx.connection.vjp(ctx.graph, list(grads))
        if len(found) != ctx.n_inputs:
            raise ChannelError("the gradient through your function has the wrong number of parts")
        checked = []
        for grad, (shape, dtype) in zip(found, ctx.input_meta):
            if grad is not None and (not isinstance(grad, torch.Tensor) or grad.shape != shape):
                raise ChannelError("the gradient through your function has the wrong shape")
            checked.append(None if grad is None else grad.to(dtype))
        return (None, None, None, *checked, *([None] * (len(grads))))


def _through_submission(connection: Channel, graph: int, inputs: list, result):
    outputs = [t for t in channel.tensors_in(result) if t.requires_grad]
    if not inputs or not outputs:
        return result
    linked = iter(_ThroughSubmission.apply(connection, graph, len(inputs), *inputs, *[o.detach() for o in outputs]))

    def relink(value):
        if isinstance(value, torch.Tensor):
            return next(linked) if value.requires_grad else value
        if isinstance(value, (list, tuple)):
            items = [relink(item) for item in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {key: relink(item) for key, item in value.items()}
        return value
    return relink(result)


# --- the no-credit rule, on the submission's source ---------------------------------------------------

def _leaf(fn) -> str:
    return getattr(fn, "__name__", "")


def _address(fn) -> tuple[str, str]:
    """(module, qualified name) by which the submission's process finds the same library function."""
    owner = getattr(fn, "__objclass__", None)
    if owner is not None:  # a C method such as torch.Tensor.softmax
        return owner.__module__, f"{owner.__qualname__}.{fn.__name__}"
    if isinstance(fn, types.FunctionType):
        return fn.__module__, fn.__qualname__
    return fn.__module__, fn.__name__  # a builtin: torch.softmax's qualname names an internal class


def _imported(node, alias) -> set[str]:
    """What one alias of an import reaches: the imported name, unless it is a module already loaded
    here (``from lmpolicy.exact import kl`` imports the module kl, not the function kl.kl). Nothing
    is imported to find out: a submission's folder may hold a module of any name."""
    if isinstance(node, ast.Import):
        return set(alias.name.split("."))
    module = "." * node.level + (node.module or "")
    if node.level == 0 and isinstance(sys.modules.get(f"{module}.{alias.name}"), types.ModuleType):
        return set()
    return {alias.name}


def _reached_names(statement, name: str) -> tuple[set[str], set[str]]:
    """(names the statement reads, library names it reaches: attributes, imports, name strings),
    for the statement as a maker of ``name`` (an import: only the alias that binds it)."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        aliases = [a for a in statement.names if (a.asname or a.name).split(".")[0] == name]
        return set(), set().union(*(_imported(statement, a) for a in aliases))
    reads, reaches = set(), set()
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.add(node.id)
        elif isinstance(node, ast.Attribute):
            reaches.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            reaches.update(*(_imported(node, a) for a in node.names))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            reaches.add(node.value)
    return reads, reaches


def library_shortcut(sources, name: str, blocked_names: set[str]) -> str | None:
    """How the submission's code reaches a blocked library function from ``name``, or None.

    Follows the top-level statements that made what ``name`` is when the tests run (its last def,
    assignment or import, and any later ``__code__`` swap or conditional rebinding) and,
    transitively, the statements that made the global names those read.
    """
    makers: dict[str, list] = {}
    for statement in checks.statements(sources):
        anew, changed = checks.bound_names(statement)
        for bound in anew:
            makers[bound] = [statement]
        for bound in changed:
            makers.setdefault(bound, []).append(statement)
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for statement in makers.get(current, ()):
            reads, reaches = _reached_names(statement, current)
            found = sorted(reaches & blocked_names)
            if found:
                how = "" if current == name else f" through {current}"
                return f"your {name}{how} uses the library's {found[0]}"
            todo.extend(reads - seen)
    return None


# --- the trusted kernel's entry points ----------------------------------------------------------------

SOURCES: list[str] = []  # the submission's code cells above the test cell that runs now
_ALL_SOURCES: list[tuple[int, str]] = []
_CHANNEL: Channel | None = None
_INJECTED: dict[str, object] = {}


def connect(info: dict, sources: list[tuple[int, str]], cell_seconds: float) -> str | None:
    """Open the channel to the submission's kernel; ``sources`` are its notebook's non-test code
    cells as (index, source), from the notebook the grader holds."""
    global _CHANNEL
    _ALL_SOURCES[:] = sources
    shell = get_ipython()
    if shell is not None:
        checks.explain_name_errors(shell, _missing_from_submission)
    try:
        _CHANNEL = Channel(info, cell_seconds)
    except Exception as error:  # noqa: BLE001 - reported as the reason, never raised into the grader
        return f"the channel to the submission's kernel could not be opened ({type(error).__name__}: {error})"
    return _CHANNEL.broken


def _missing_from_submission(name: str, namespace: dict) -> str:
    """What a test's NameError says in the feedback: a name of the submission that it does not have."""
    if name in checks.binds(SOURCES):
        return (f"a cell of your notebook above this test defines {name}, but it did not exist when the test ran: "
                "that cell raised before it got there (its error is in your notebook)")
    return (f"your notebook does not define {name}: its answer cell above this test must, with the name and "
            "arguments the released notebook gives it")


def bind(user_ns: dict, cell_source: str = "", cell_index: int | None = None) -> str | None:
    """Before test cell ``cell_index``: the submission's current names into ``user_ns``; the reason if it fails.

    Every function and small value comes; a large value only if ``cell_source`` mentions its name.
    The no-credit rule reads the cells above this one (what has run when the test runs).
    """
    SOURCES[:] = [source for index, source in _ALL_SOURCES if cell_index is None or index < cell_index]
    for name, value in list(_INJECTED.items()):
        if user_ns.get(name) is value:
            del user_ns[name]
    _INJECTED.clear()
    if _CHANNEL is None:
        return "the channel to the submission's kernel is not open"
    _CHANNEL.new_cell()
    try:
        found = _CHANNEL.namespace(set(user_ns), set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", cell_source)))
    except ChannelError as error:
        return f"the submission's names could not be read: {error}"
    for name, value in found.items():
        user_ns[name] = _INJECTED[name] = value
    return None
