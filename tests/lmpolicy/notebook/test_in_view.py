"""lmpolicy.notebook.in_view: after a cell that raised, a kernel JupyterLab started shows the script that brings the
cell into view; no other kernel does, and no other cell. tests/browser/test_first_hour.py sees the script work."""
import os

import pytest

from lmpolicy.notebook import in_view


def outputs_of(client, code: str) -> list[tuple[str, dict]]:
    """Run ``code`` in the kernel; its outputs in order, as (message type, content)."""
    message_id = client.execute(code, stop_on_error=False)
    found = []
    while True:
        message = client.get_iopub_msg(timeout=60)
        if message["parent_header"].get("msg_id") != message_id:
            continue
        kind = message["msg_type"]
        if kind == "status" and message["content"]["execution_state"] == "idle":
            return found
        if kind in ("stream", "error", "display_data", "execute_result"):
            found.append((kind, message["content"]))


def scripts(outputs) -> list[dict]:
    return [content["data"] for kind, content in outputs if kind == "display_data"
            and "application/javascript" in content["data"]]


@pytest.fixture
def start_kernel(tmp_path):
    from tests.lmpolicy.notebook.test_checks import start_ipc_kernel

    started = []

    def start(**env_changes):
        env = dict(os.environ, JPY_SESSION_NAME=str(tmp_path / "notebook.ipynb"))
        env.pop("NBGRADER_EXECUTION", None)
        env.update(env_changes)
        env = {name: value for name, value in env.items() if value is not None}
        manager, client = start_ipc_kernel(env)
        started.append((manager, client))
        outputs_of(client, "import lmpolicy")
        return client

    yield start
    for manager, client in started:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_cell_that_raises_in_a_jupyterlab_kernel_is_followed_by_the_script_alone(start_kernel):
    client = start_kernel()
    raised = outputs_of(client, "1 / 0")
    assert [kind for kind, _ in raised] == ["error", "display_data"]  # after the error, as the cell's last output
    (script,) = scripts(raised)
    assert script["text/plain"] == ""  # where scripts are dropped (the feedback), nothing shows
    assert '"kind": "stopped"' in script["application/javascript"]
    assert scripts(outputs_of(client, "x = 1")) == []
    assert scripts(outputs_of(client, "raise KeyboardInterrupt")) == []  # the student stopped it: the view is theirs


@pytest.mark.parametrize("env", [{"JPY_SESSION_NAME": None}, {"NBGRADER_EXECUTION": "validate"}],
                         ids=["a kernel JupyterLab did not start", "under nbgrader"])
def test_no_script_from_any_other_kernel(start_kernel, env):
    client = start_kernel(**env)
    raised = outputs_of(client, "1 / 0")
    assert [kind for kind, _ in raised] == ["error"]


def test_only_the_two_kinds():
    with pytest.raises(ValueError, match="kind must be"):
        in_view.bring_into_view("anywhere")
