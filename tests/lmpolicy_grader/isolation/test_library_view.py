"""The student library as the grading kernel sees it (isolation/library_view.py): per notebook, exactly the
modules its given cells import and what they import (any other module's import says "not available while
grading" and why; the answer key in none); within them, the functions lmpolicy.notebook.forbidden declares for its
exercises raise "not available while grading", and their real bodies are in no file the sandboxed kernel can
read, whatever way it looks (a copied code object, getsource and exec, a read of the file by its path, a
search of every folder it can import from). What the kept functions compute: test_no_oracle.py."""
from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lmpolicy.exercises import registry
from lmpolicy.notebook import catalogue, forbidden
from lmpolicy_grader.isolation import library_view, sandbox

from ..grading_kernel import run_in_kernel, started

ALL_NOTEBOOKS = sorted(path.stem for path in catalogue.source_folder().glob("*.ipynb"))
needs_sandbox = pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                                   reason=f"no sandbox here: {sandbox.sandbox_problem()}")


# "module:qualname" as the object it names, as the declaration resolves it
_resolve = forbidden._library_object


def _body_lines(function: str) -> list[str]:
    """The real function's code lines after its docstring (long enough to be its own)."""
    source = textwrap.dedent(inspect.getsource(_resolve(function)))
    node = ast.parse(source).body[0]
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    lines = "\n".join(ast.get_source_segment(source, statement) for statement in body).splitlines()
    return [line.strip() for line in lines if len(line.strip()) >= 12]


def test_every_declared_shortcut_is_an_exercise_of_a_notebook_and_a_real_library_function():
    keys = {e.key for path in catalogue.source_folder().glob("*.ipynb")
            for e in catalogue.notebook_exercises(path.stem, catalogue.read_notebook(path))}
    assert set(registry.exercises()) <= keys, set(registry.exercises()) - keys
    for key, exercise in registry.exercises().items():
        assert all(callable(fn) for fn in forbidden.callables(exercise.shortcuts)), key


def test_each_notebooks_view_holds_exactly_the_modules_its_given_cells_import_and_theirs():
    folder = library_view.library_folder()
    checks_only = {"lmpolicy", "lmpolicy.arithmetic", "lmpolicy.notebook", "lmpolicy.notebook.checks",
                   "lmpolicy.notebook.progress", "lmpolicy.notebook.catalogue", "lmpolicy.notebook.verdict_lines",
                   "lmpolicy.notebook.failures", "lmpolicy.notebook.student_frames", "lmpolicy.notebook.kernel",
                   "lmpolicy.notebook.bindings", "lmpolicy.notebook.blocking", "lmpolicy.notebook.recorder",
                   "lmpolicy.notebook.name_advice", "lmpolicy.notebook.code_rule_notice", "lmpolicy.notebook.in_view",
                   "lmpolicy.notebook.answer_runs", "lmpolicy.notebook.save_request", "lmpolicy.notebook.page_script"}
    assert library_view.needed_modules(folder, None) == checks_only
    assert library_view.needed_modules(folder, "not_a_course_notebook") == checks_only
    nb01 = library_view.needed_modules(folder, "01_policy_softmax")
    assert {"lmpolicy.tinylm.model", "lmpolicy.tinylm.tokenizer", "lmpolicy.per_student.variants"} <= nb01
    assert "lmpolicy.tinylm.generate" not in nb01  # the sampler, which computes a softmax on its way
    for notebook in ALL_NOTEBOOKS:
        kept = library_view.needed_modules(folder, notebook)
        assert "lmpolicy.per_student.variant_answers" not in kept and "lmpolicy.tinylm.kl_placement" not in kept, notebook
    assert "lmpolicy.tinylm.logprobs" not in library_view.needed_modules(folder, "07_logprob_plumbing")


def test_a_module_the_view_lacks_raises_an_import_error_saying_why(tmp_path):
    view = library_view.build(library_view.library_folder(), "01_policy_softmax", tmp_path)
    probe = textwrap.dedent("""
        import json
        out = {}
        for name in ("lmpolicy.tinylm.generate", "lmpolicy.tinylm.kl_placement", "lmpolicy.per_student.variant_answers"):
            try:
                __import__(name)
                out[name] = "imported"
            except ImportError as error:
                out[name] = str(error)
        from lmpolicy.per_student import variants
        try:
            variants.answer("ex11_1a")
            out["answer"] = "answered"
        except ImportError as error:
            out["answer"] = str(error)
        out["token_probs"] = list(variants.for_exercise("ex11_1a").token_probs)
        print(json.dumps(out))
    """)
    from lmpolicy.per_student import variant_answers
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LMPOLICY_STUDENT_ID": "alice",
           "LMPOLICY_VARIANT_PARAMS": variant_answers.drawn_for("alice")}
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    import json
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert view == tmp_path / "lmpolicy"
    assert out["lmpolicy.tinylm.generate"] == ("lmpolicy.tinylm.generate is not available while grading: the grading "
                                               "kernel holds only the library modules that 01_policy_softmax's own "
                                               "cells use")
    assert out["lmpolicy.per_student.variant_answers"].startswith("lmpolicy.per_student.variant_answers is not available while grading: it is "
                                                      "the answer key of Exercise 11.1(a)")
    assert out["answer"] == out["lmpolicy.per_student.variant_answers"]
    from lmpolicy.per_student import variants
    assert out["token_probs"] == list(variants.for_exercise("ex11_1a", "alice").token_probs)


def test_a_blanked_function_keeps_its_signature_and_docstring_and_says_what_to_do(tmp_path):
    view = library_view.build(library_view.library_folder(), "08_tinylm_reinforce", tmp_path)
    probe = textwrap.dedent("""
        import inspect, json
        from lmpolicy.tinylm import reinforce
        from lmpolicy.notebook import checks
        out = {"doc": reinforce.policy_gradient_loss.__doc__,
               "signature": str(inspect.signature(reinforce.kl_penalized_rewards))}
        try:
            reinforce.policy_gradient_loss(None, None, None)
        except checks.LibraryShortcutUsed as error:
            out["raised"] = str(error)
        print(json.dumps(out))
    """)
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)}, check=True)
    import json
    from lmpolicy.tinylm import reinforce
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["doc"] == reinforce.policy_gradient_loss.__doc__
    assert out["signature"] == str(inspect.signature(reinforce.kl_penalized_rewards))
    assert out["raised"] == (f"lmpolicy.tinylm.reinforce.policy_gradient_loss is not available while grading: "
                             f"{catalogue.label('nb08_pg_loss')} asks you to write it yourself")
    # the notebook's other library functions are whole
    generate = (view / "tinylm" / "generate.py").read_text()
    assert generate == (library_view.library_folder() / "tinylm" / "generate.py").read_text()


def test_each_notebooks_view_blanks_every_declared_function_that_answers_one_of_its_exercises():
    softmaxes = {"lmpolicy.exact.temperature:softmax", "lmpolicy.exact.temperature:log_softmax",
                 "lmpolicy.exact.temperature:power_distribution"}
    logprobs = {"lmpolicy.tinylm.logprobs:sequence_logprob", "lmpolicy.tinylm.logprobs:response_logprobs"}
    assert set(library_view.unavailable("01_policy_softmax")) == softmaxes | logprobs
    assert set(library_view.unavailable("04_two_mdp_views")) == {
        "lmpolicy.exact.tilting:expected_reward", "lmpolicy.exact.kl:kl", "lmpolicy.exact.kl:sequence_kl",
        "lmpolicy.exact.kl:chain_rule_kl"}
    assert set(library_view.unavailable("05_tilted_optimum")) == {
        "lmpolicy.exact.tilting:tilted_optimum", "lmpolicy.exact.tilting:kl_objective",
        "lmpolicy.exact.tilting:frontier", "lmpolicy.exact.temperature:power_distribution",
        "lmpolicy.exact.tilting:soft_values", "lmpolicy.exact.tilting:token_level_optimum"}
    assert set(library_view.unavailable("06_kl_estimators")) == {"lmpolicy.exact.kl:kl_estimates",
                                                                 "lmpolicy.tinylm.kl_placement:kl_estimate"}
    assert library_view.unavailable(None) == {} and library_view.unavailable("03_three_stages") == {}


def test_a_view_is_built_once_per_library_source_and_notebook():
    start = time.perf_counter()
    first = library_view.view("02_temperature")
    built = time.perf_counter() - start
    start = time.perf_counter()
    again = library_view.view("02_temperature")
    reused = time.perf_counter() - start
    assert first == again and first.is_dir()
    assert first.parent.parent.name == library_view.source_hash()
    print(f"view of 02_temperature: {built * 1000:.0f} ms the first time in this process, {reused * 1000:.1f} ms after")


def test_installing_a_view_over_another_changes_only_the_files_that_differ(tmp_path):
    strictest, notebook = library_view.view(None), library_view.view("02_temperature")
    target = tmp_path / "library"
    library_view.install(strictest, target)
    checks_inode = (target / "notebook" / "checks.py").stat().st_ino
    library_view.install(notebook, target)
    assert (target / "notebook" / "checks.py").stat().st_ino == checks_inode  # imported before the notebook came: untouched
    assert os.path.samefile(target / "exact" / "temperature.py", notebook / "exact" / "temperature.py")
    assert "def softmax" in (target / "exact" / "temperature.py").read_text()  # 02 uses it; not an exercise of 02
    assert "raise ImportError" in (target / "tinylm" / "generate.py").read_text()  # 02's cells do not use it


@needs_sandbox
@started
def test_in_the_sandbox_no_way_reaches_a_blanked_functions_real_body(tmp_path, spare):
    """Notebook 08's kernel: policy_gradient_loss and kl_penalized_rewards (its Exercises 08.pg-loss, 08.kl-reward)."""
    blanked = ["lmpolicy.tinylm.reinforce:policy_gradient_loss", "lmpolicy.tinylm.reinforce:kl_penalized_rewards"]
    markers = sorted({line for function in blanked for line in _body_lines(function)})
    assert markers, "no body lines to look for"
    folder = tmp_path / "notebook"
    folder.mkdir()
    library_view.grading("08_tinylm_reinforce")
    try:
        seen = run_in_kernel(folder, f"""
            import glob, importlib.util, inspect, json, marshal, os, subprocess, sys, tempfile, types
            import torch
            from lmpolicy.notebook import checks
            from lmpolicy.tinylm import reinforce as logprobs
            out = {{}}
            def attempt(name, make):
                try:
                    value = make()
                    out[name] = "returned " + type(value).__name__
                except checks.LibraryShortcutUsed as error:
                    out[name] = "LibraryShortcutUsed: " + str(error)
            logits, ids = torch.zeros(1, 6, 15), torch.zeros(1, 6, dtype=torch.long)
            attempt("call", lambda: logprobs.policy_gradient_loss(logits, ids, 2))
            copy = types.FunctionType(getattr(logprobs, "policy_gradient_" + "loss").__code__, logprobs.__dict__)
            attempt("code copy", lambda: copy(logits, ids, 2))
            namespace = {{}}
            exec(inspect.getsource(logprobs), namespace)
            attempt("exec of getsource", lambda: namespace["policy_gradient_loss"](logits, ids, 2))
            namespace = {{}}
            exec(open(logprobs.__file__).read(), namespace)
            attempt("exec of the file", lambda: namespace["kl_penalized_rewards"](torch.zeros(1), torch.zeros(1, 3), torch.zeros(1, 3), torch.ones(1, 3), 0.1))
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
                f.write({chr(10).join(markers) + chr(10)!r})
            folders = sorted({{p for p in sys.path if os.path.isdir(p) and p not in ("", ".", os.getcwd())}}
                             | {{"/etc", "/tmp", os.getcwd()}})
            found = subprocess.run(["grep", "-rIlF", "-f", f.name, *folders], capture_output=True, text=True).stdout
            out["files holding a body line"] = sorted(set(found.split()) - {{f.name}})
            # the view's own bytecode holds the view's code: no sequence_logprob in policy_gradient_loss
            pyc = importlib.util.cache_from_source(logprobs.__file__)
            code = marshal.loads(open(pyc, "rb").read()[16:])
            function = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "policy_gradient_loss")
            out["names in its bytecode"] = sorted(function.co_names)
            # what the notebook needs: TinyLM from its checkpoint, sampling, the tokenizer
            from lmpolicy.tinylm.generate import generate
            from lmpolicy.tinylm.model import load_pretrained
            from lmpolicy.tinylm.tokenizer import encode_prompts
            model = load_pretrained()
            drawn = generate(model, encode_prompts([(12, 34)]), temperature=0).response_ids
            out["generated"] = list(drawn.shape)
            print(json.dumps(out))
        """, spare=spare)
    finally:
        library_view.grading(None)
    says = "not available while grading: Exercise 08."
    for attempt in ("call", "code copy", "exec of getsource", "exec of the file"):
        assert seen[attempt].startswith("LibraryShortcutUsed") and says in seen[attempt], (attempt, seen[attempt])
    assert seen["files holding a body line"] == []
    assert "sequence_logprob" not in seen["names in its bytecode"] and "LibraryShortcutUsed" in seen["names in its bytecode"]
    assert seen["generated"] == [1, 4]


# The functions a notebook's own demos and set-up cells used to need in the grading kernel (issue 20), each
# called there by a computed name, with arguments it would answer: (notebook, function, call). ``lib`` is the
# module the function lives in, ``toy`` and ``rewards`` the worked example.
FORMERLY_GIVEN = [
    ("01_policy_softmax", "lmpolicy.exact.temperature:softmax", "fn(np.array([2.0, 1.0, 0.0]))"),
    ("01_policy_softmax", "lmpolicy.exact.temperature:log_softmax", "fn(np.array([2.0, 1.0, 0.0]))"),
    ("04_two_mdp_views", "lmpolicy.exact.tilting:expected_reward", "fn(toy, rewards)"),
    ("04_two_mdp_views", "lmpolicy.exact.kl:kl", "fn(toy.response_probs(), [0.25, 0.25, 0.25, 0.25])"),
    ("04_two_mdp_views", "lmpolicy.exact.kl:chain_rule_kl", "fn(tilting.token_level_optimum(toy, rewards, 1.0), toy)"),
    ("05_tilted_optimum", "lmpolicy.exact.tilting:tilted_optimum", "fn(toy, rewards, 1.0)"),
    ("05_tilted_optimum", "lmpolicy.exact.tilting:kl_objective", "fn(toy.response_probs(), toy, rewards, 1.0)"),
    ("05_tilted_optimum", "lmpolicy.exact.tilting:frontier", "fn(toy, rewards, [0.5, 1.0])"),
    ("05_tilted_optimum", "lmpolicy.exact.tilting:soft_values", "fn(toy, rewards, 1.0)"),
    ("05_tilted_optimum", "lmpolicy.exact.tilting:token_level_optimum", "fn(toy, rewards, 1.0)"),
    ("05_tilted_optimum", "lmpolicy.exact.temperature:power_distribution", "fn(toy, 0.5)"),
    ("06_kl_estimators", "lmpolicy.exact.kl:kl_estimates", "fn([-0.5, -1.2], [-0.7, -1.0])"),
]


@pytest.fixture(scope="module")
def computed_name_calls(tmp_path_factory):
    """notebook -> function -> what its computed-name call did in that notebook's sandboxed grading kernel
    (one kernel per notebook, started on first use)."""
    seen: dict[str, dict[str, str]] = {}

    def of(notebook: str) -> dict[str, str]:
        if notebook not in seen:
            calls = [(function, call) for nb, function, call in FORMERLY_GIVEN if nb == notebook]
            folder = tmp_path_factory.mktemp(notebook)
            library_view.grading(notebook)
            try:
                seen[notebook] = run_in_kernel(folder, f"""
                    import importlib, json
                    import numpy as np
                    from lmpolicy.notebook import checks
                    from lmpolicy.exact import scenarios
                    try:  # not in every view: only where the notebook's cells use it
                        from lmpolicy.exact import tilting
                    except ImportError:
                        tilting = None
                    worked = scenarios.get_scenario("worked")
                    toy, rewards = worked.model, worked.rewards
                    out = {{}}
                    for function, call in {calls!r}:
                        module, name = function.split(":")
                        lib = importlib.import_module(module)
                        fn = getattr(lib, "".join(reversed(name[::-1])))  # a name the source never spells
                        try:
                            out[function] = "returned " + type(eval(call)).__name__
                        except checks.LibraryShortcutUsed as error:
                            out[function] = "LibraryShortcutUsed: " + str(error)
                    print(json.dumps(out))
                """)
            finally:
                library_view.grading(None)
        return seen[notebook]
    return of


@needs_sandbox
@pytest.mark.parametrize("notebook,function", [
    pytest.param(notebook, function, id=f"{notebook[:2]}-{function.split(':')[1]}")
    for notebook, function, _ in FORMERLY_GIVEN])
def test_in_the_sandbox_a_formerly_given_function_is_not_there_by_any_name(computed_name_calls, notebook, function):
    """Issue 20: a notebook's own demos no longer need its exercises' library functions while grading, so a
    call by a computed name in that notebook's grading kernel raises "not available while grading"."""
    did = computed_name_calls(notebook)[function]
    assert did.startswith("LibraryShortcutUsed: ") and " is not available while grading: " in did, did
    assert did.split(": ", 1)[1].startswith(function.replace(":", ".") + " is not available"), did


@pytest.mark.slow
@pytest.mark.parametrize("notebook", ALL_NOTEBOOKS)
def test_what_the_grading_kernel_runs_of_a_notebook_runs_in_its_view(notebook, tmp_path):
    """Every cell but the tests (they run in the trusted kernel), as the grader runs them for a student with
    their own numbers, against the notebook's view: no set-up cell, demo or reference answer needs a
    function the view lacks (a demo built on one is skipped while grading)."""
    from nbformat.v4 import new_code_cell

    from lmpolicy_grader.cells import is_test

    from ...notebooks.notebook_tools import SOURCE_DIR, client, kernel_env, read

    view = library_view.build(library_view.library_folder(), notebook, tmp_path / "view")
    nb = read(SOURCE_DIR / f"{notebook}.ipynb")
    nb.cells = [cell for cell in nb.cells if not is_test(cell)]
    nb.cells.append(new_code_cell(f"import lmpolicy\nassert lmpolicy.__file__.startswith({str(view)!r}), lmpolicy.__file__"))
    from traitlets.config import Config

    from lmpolicy_grader.students import kernel_environments

    env = kernel_env(grader=True, progress_file=tmp_path / "progress.json") | {"PYTHONPATH": str(view.parent)}
    told, _ = kernel_environments(Config(), tmp_path, "alice", "0" * 64)  # what the grader tells the grading kernel
    env = {name: value for name, value in (env | told).items() if value is not None}
    assert env["LMPOLICY_STUDENT_ID"] == "alice"
    client(nb).execute(env=env)
