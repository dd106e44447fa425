"""The page scripts a kernel shows: JavaScript that parses, each wrapped to act once, fresh, and in the page."""
import json
import shutil
import subprocess

import pytest

from lmpolicy.notebook import answer_runs, in_view, page_script, save_request

BODIES = {"in_view": (in_view.BRING, {"kind": in_view.STOPPED}),
          "save_request": (save_request.PRESS_SAVE, {}),
          "answer_runs": (answer_runs.MARK_EDITED, {"answers": [["prob_86", 3]]})}


@pytest.mark.parametrize("name", BODIES)
def test_every_script_a_kernel_shows_is_javascript_that_parses(name, tmp_path):
    """A syntax error would only show as nothing happening in the browser: node parses the script first."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed (make install-all installs it for the tests)")
    body, spec = BODIES[name]
    script = tmp_path / f"{name}.js"
    script.write_text(page_script.script(body, spec))
    checked = subprocess.run(["node", "--check", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_spec_is_made_now_with_an_id_of_its_own():
    def spec_of(text):
        return json.loads(text[text.rindex("})(element, ") + len("})(element, "):text.rindex(");")])

    first, second = (spec_of(page_script.script("hide();", {"kind": "x"})) for _ in range(2))
    assert first["kind"] == "x" and first["freshMs"] == page_script.FRESH_SECONDS * 1000
    assert first["id"] != second["id"] and second["madeAt"] >= first["madeAt"]


def test_nothing_is_shown_outside_a_kernel_jupyterlab_started(monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert page_script.show("hide();") is False


@pytest.mark.parametrize("made", ["live, after the page loaded", "saved, before the page loaded"])
def test_a_script_acts_only_for_an_output_made_since_the_page_loaded(made, tmp_path):
    """A notebook reopened in a new page within the half minute shows its saved script output again: it must not
    act (it took the view to where an earlier Run All had stopped)."""
    import re
    import time

    if shutil.which("node") is None:
        pytest.skip("node is not installed (make install-all installs it for the tests)")
    text = page_script.script("console.log('acted');", {})
    made_at = re.search(r'"madeAt": ([0-9.e+]+)', text).group(1)
    if made.startswith("live"):
        text = text.replace(f'"madeAt": {made_at}', '"madeAt": Date.now()')  # made once node's page was loaded
    else:
        time.sleep(0.05)  # the page (node) loads after the output was made
    harness = tmp_path / "page.js"
    harness.write_text("globalThis.window = globalThis;\n"
                       "const element = { isConnected: true, closest: () => null };\n" + text)
    ran = subprocess.run(["node", str(harness)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == ("acted" if made.startswith("live") else ""), ran.stdout
