"""kernels.comm_request: every call into a kernel framed alike, whichever server answers it."""
from __future__ import annotations

from lmpolicy_grader.kernels import comm_request, remote_call


class Comm:
    """What a kernel's comm is to a server: it sends, and closes."""

    def __init__(self):
        self.sent: list[tuple[dict, list]] = []

    def send(self, data, buffers=None):
        self.sent.append((data, buffers or []))

    def close(self):
        pass


class Shell:
    """Just enough of an IPython shell for ``remote_call.serve`` and the call server to register on."""

    def __init__(self):
        self.user_ns: dict = {}
        self.targets: dict = {}
        comm_manager = type("CommManager", (), {"register_target": lambda _, name, fn: self.targets.update({name: fn})})
        self.kernel = type("Kernel", (), {"comm_manager": comm_manager()})()


def _opened(shell: Shell, target: str, data: dict) -> dict:
    comm = Comm()
    shell.targets[target](comm, {"content": {"data": data}})
    return comm.sent[0][0]


def test_both_servers_answer_a_request_in_the_same_form():
    """remote_call's server (the grader's own code in a kernel) and the channel's (the submission's kernel)
    answer a request with its id, and a failure as ``failed`` with its type and words."""
    from lmpolicy_grader.trusted_tests.call_server import CallServer

    shell = Shell()
    remote_call.serve(shell, "demo", {"add": lambda a, b: a + b, "fail": lambda: 1 / 0})
    assert _opened(shell, "demo", comm_request.request(1, "add", arguments={"a": 40, "b": 2})) == {"id": 1, "result": 42}
    assert _opened(shell, "demo", comm_request.request(1, "fail")) == \
        {"id": 1, comm_request.FAILED: "ZeroDivisionError: division by zero"}
    assert _opened(shell, "demo", comm_request.request(1, "nothing"))[comm_request.FAILED].startswith("LookupError")

    server, comm = CallServer(shell), Comm()
    server.answer(comm, {"content": {"data": comm_request.request(7, "hello")}})
    server.answer(comm, {"content": {"data": comm_request.request(8, "nothing")}})
    assert comm.sent[0] == ({"id": 7}, [])
    assert comm.sent[1][0]["id"] == 8 and comm.sent[1][0][comm_request.FAILED].startswith("AttributeError")


def test_an_answer_is_the_message_on_the_requests_comm_with_its_id():
    def message(data, comm_id="c", parent="m"):
        return {"msg_type": "comm_msg", "parent_header": {"msg_id": parent}, "content": {"comm_id": comm_id, "data": data}}
    assert comm_request.answer_in(message({"id": 3, "result": 1}), "c", 3) == {"id": 3, "result": 1}
    assert comm_request.answer_in(message({"id": 3}, comm_id="other"), "c", 3) is None
    assert comm_request.answer_in(message({"id": 2}), "c", 3) is None  # an earlier request's late answer
    assert comm_request.answer_in(message({"id": 3}, parent="earlier"), "c", 3, "m") is None
    try:
        comm_request.answer_in(message("not a dict"), "c", 3, "m")
    except comm_request.NotAnAnswer:
        pass
    else:
        raise AssertionError("a reply to the request that is not an answer must say so")
