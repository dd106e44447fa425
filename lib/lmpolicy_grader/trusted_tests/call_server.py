"""The grading kernel's side of the channel: answers the trusted tests' requests over a Jupyter comm.

Loaded as an IPython extension when the grading kernel starts (before any submitted code runs),
it registers the comm target ``lmpolicy_grader.calls``. The trusted test process opens one comm
and sends requests, each a JSON header in the form of ``kernels.comm_request`` plus raw buffers
(``codec``):

- ``hello``: an empty answer (the trusted side's subscription is in place once one arrives);
- ``namespace``: the submission's names (skipping those the tests define themselves): a function
  is announced by name, any other value is sent in the safe form (or said to be unreadable); a
  large value only if the test cell mentions its name (every reply also reaches the grader's own
  client of this kernel, which must read it);
- ``call``: call a function of the submission with arguments rebuilt from the safe form (and, if
  asked, counting its calls of another of the submission's functions); answer with the result and
  the arguments as the call left them (or what it raised, with the submission's own frames). No
  library function is blocked here: those that answer the notebook's exercises are not in this
  process's library at all (``isolation.library_view``), and the no-credit rule is read on the
  trusted side from the notebook's source (``no_credit``); torch's operators that compute the
  exercise's quantity, which no reading of the source can find behind every name, refuse during the
  call (``refuse_operators``: the patterns the trusted side sends, ``blocking.refusing_operators``);
- ``vjp``: a vector-Jacobian product through the graph of an earlier call, for a check that
  differentiates through the submission's function.

Everything here runs inside the submission's process, which can change any of it: that can make
the submission's own answers wrong or missing, never change how the trusted tests run or judge.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import sys
import traceback
import types
from collections import OrderedDict

import torch

from lmpolicy.notebook import blocking, checks, student_frames  # imported before any submitted code runs, like everything here
from lmpolicy_grader.kernels import comm_request
from lmpolicy_grader.trusted_tests import codec as channel

TARGET = "lmpolicy_grader.calls"
IPYTHON_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# What the tests may call through the channel; any other value (a model, a callable object) must
# cross in the safe form or not at all.
FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)
MAX_FRAMES = 2
# A value the test cell does not mention is sent only up to this size (``globals().get(name)`` in a
# test names it in a string, which counts as a mention).
SMALL_ITEMS, SMALL_BYTES = 200, 64 * 1024
KEPT_GRAPHS = 64  # calls whose autograd graph is kept for a later vjp


class CallServer:
    """Answers one comm's requests against the shell's user namespace."""

    def __init__(self, shell):
        self.shell = shell
        self.graphs: OrderedDict[int, tuple[list, list]] = OrderedDict()
        self.calls = 0

    def on_open(self, comm, _open_msg) -> None:
        comm.on_msg(lambda msg: self.answer(comm, msg))

    def answer(self, comm, msg) -> None:
        encoder = channel.Encoder()

        def run(data: dict) -> dict:
            return getattr(self, f"_op_{data.get('op')}")(data, channel.Decoder(msg.get("buffers") or []), encoder)
        reply = comm_request.answered(msg["content"].get("data") or {}, run)
        comm.send(reply, buffers=[] if comm_request.FAILED in reply else encoder.buffers)

    # --- operations ------------------------------------------------------------------------------

    def _op_hello(self, _data, _decoder, _encoder) -> dict:
        return {}

    def _op_namespace(self, data, _decoder, encoder) -> dict:
        skip, mentioned = set(data.get("skip") or ()), set(data.get("mentioned") or ())
        names = {}
        for name, value in list(self.shell.user_ns.items()):
            if (name.startswith("_") or name in skip or name in IPYTHON_NAMES or hasattr(builtins, name)
                    or isinstance(value, (types.ModuleType, type))):
                continue
            if isinstance(value, FUNCTION_TYPES):
                names[name] = {"kind": "function"}
                continue
            small = {} if name in mentioned else {"max_items": SMALL_ITEMS, "max_bytes": SMALL_BYTES}
            try:
                names[name] = {"kind": "value", "value": encoder.encode_one(value, name, **small)}
            except channel.NotEncodable as error:
                if not small:
                    names[name] = {"kind": "unreadable", "why": str(error)[:300]}
        return {"names": names}

    def _op_call(self, data, decoder, encoder) -> dict:
        name = data.get("name")
        fn = self.shell.user_ns.get(name)
        if not callable(fn):
            return {"missing": f"{name} is not a function in the submission's namespace"}
        args, kwargs = decoder.decode(data["args"]), decoder.decode(data["kwargs"])
        inputs = [t for t in channel.tensors_in((args, kwargs)) if t.requires_grad]
        callee, calls = data.get("count"), []
        counting = isinstance(callee, str) and isinstance(self.shell.user_ns.get(callee), FUNCTION_TYPES)
        if counting:
            yours = self.shell.user_ns[callee]
            self.shell.user_ns[callee] = _counting(yours, calls)
        try:
            with contextlib.ExitStack() as refusing:
                for pattern, what in data.get("refuse_operators") or ():
                    refusing.enter_context(blocking.refusing_operators(str(pattern), str(what)))
                result = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 - the submission's exception, sent back as words
            return {"raised": _describe(error)}
        finally:
            if counting:
                self.shell.user_ns[callee] = yours
        self.calls += 1
        reply = {"result": encoder.encode(result, f"what {name}(...) returned"), "counted": len(calls),
                 "args": encoder.encode(args, "the arguments"), "kwargs": encoder.encode(kwargs, "the arguments")}
        outputs = [t for t in channel.tensors_in(result) if t.requires_grad]
        if inputs and outputs:
            self.graphs[self.calls] = (inputs, outputs)
            while len(self.graphs) > KEPT_GRAPHS:
                self.graphs.popitem(last=False)
            reply["graph"] = self.calls
        return reply

    def _op_vjp(self, data, decoder, encoder) -> dict:
        inputs, outputs = self.graphs[data["graph"]]
        grads = decoder.decode(data["grads"])
        pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None]
        found = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                                    allow_unused=True, retain_graph=True)
        return {"grads": encoder.encode(list(found), "the gradients")}


def _counting(fn, calls: list):
    def counted(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)
    return counted


def _describe(error: BaseException) -> dict:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if student_frames.is_student_code(f.filename)]
    return {"type": type(error).__name__, "message": str(error)[:1000],
            "shortcut": isinstance(error, checks.LibraryShortcutUsed),
            "frames": [student_frames.frame_line(f) for f in frames[-MAX_FRAMES:]]}


def load_ipython_extension(shell) -> None:
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not hasattr(kernel, "comm_manager"):
        print("lmpolicy_grader.trusted_tests.call_server: not in a Jupyter kernel, no channel", file=sys.stderr)
        return
    kernel.comm_manager.register_target(TARGET, CallServer(shell).on_open)
