"""No function the grading kernel can reach answers a graded exercise (isolation/library_view.py).

For each notebook, its view of the library is built and, in a separate process that imports only that
view, every public and private callable of every module importable there (classes, and the functions of
their bodies, included) is called on each of the notebook's exercises' hidden-test inputs in the
arrangements its signature allows (bounded: the inputs in every order, of every length up to the
function's positional arity, then the same with ``dim=-1``; the estimator names the notebooks print are
offered after them; a callable returned is called once more the same way). A call answers when its result holds
the exercise's reference output, or when a torch function it runs on the way returns it (seen by a
``TorchFunctionMode``: what a submission could capture the same way). For the per-student exercises the
inputs are the exercise key and the student id, and the reference their numeric answers.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lmpolicy.notebook import catalogue
from lmpolicy_grader.isolation import library_view

STUDENT = "alice"


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _softmax_case():
    logits = 3 * torch.randn(4, 7, generator=_g(1), dtype=torch.float64)
    return (logits,), torch.softmax(logits, -1)


def _sequence_logprob_1a():
    probs = 0.05 + 0.9 * torch.rand(3, 5, generator=_g(2), dtype=torch.float64)
    return (probs,), torch.log(probs).sum(-1)


def _greedy():
    logits = torch.randn(6, 10, generator=_g(3), dtype=torch.float64)
    return (logits, 0), logits.argmax(-1)


def _top_k():
    logits = torch.randn(5, 10, generator=_g(4), dtype=torch.float64)
    kth = logits.topk(3, dim=-1).values[..., -1:]
    return (logits, 3), torch.where(logits < kth, torch.tensor(-math.inf, dtype=torch.float64), logits)


def _top_p():
    logits = torch.randn(5, 10, generator=_g(5), dtype=torch.float64)
    probs = torch.softmax(logits, -1)
    order = probs.argsort(-1, descending=True)
    sorted_probs = probs.gather(-1, order)
    keep_sorted = (sorted_probs.cumsum(-1) - sorted_probs) < 0.7
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return (logits, 0.7), torch.where(keep, logits, torch.tensor(-math.inf, dtype=torch.float64))


def _kl_chain_rule():
    rng = np.random.default_rng(6)
    p_first, q_first = rng.dirichlet(np.ones(2)), rng.dirichlet(np.ones(2))
    p_second, q_second = rng.dirichlet(np.ones(2), size=2), rng.dirichlet(np.ones(2), size=2)
    p = (p_first[:, None] * p_second).ravel()
    q = (q_first[:, None] * q_second).ravel()
    return (p_first, p_second, q_first, q_second), float(np.sum(p * np.log(p / q)))


def _tilted_optimum():
    rng = np.random.default_rng(7)
    ref, rewards, beta = rng.dirichlet(np.ones(6)), rng.normal(0, 2, 6), 0.7
    tilted = ref * np.exp(rewards / beta)
    return (ref, rewards, beta), tilted / tilted.sum()


def _k3():
    logp = -3 * torch.rand(4, 6, generator=_g(8), dtype=torch.float64)
    ref_logp = -3 * torch.rand(4, 6, generator=_g(80), dtype=torch.float64)
    return (logp, ref_logp), torch.exp(ref_logp - logp) - 1 - (ref_logp - logp)


def _response_logprobs():
    logits = 3 * torch.randn(3, 9, 5, generator=_g(9), dtype=torch.float64)
    ids = torch.randint(0, 5, (3, 9), generator=_g(10))
    logp = torch.log_softmax(logits, -1)
    expected = logp[:, 3:-1].gather(-1, ids[:, 4:, None]).squeeze(-1)
    return (logits, ids, 4), expected


def _masked_sum():
    logp = -torch.rand(4, 6, generator=_g(11), dtype=torch.float64) * 3
    mask = (torch.arange(6) < torch.tensor([[6], [3], [1], [4]])).long()
    return (logp, mask), torch.where(mask.bool(), logp, torch.zeros(())).sum(-1)


def _baseline():
    rewards = torch.rand(3, 4, generator=_g(12), dtype=torch.float64)
    return (rewards,), (rewards.sum(1, keepdim=True) - rewards) / 3


def _kl_reward():
    logp = -torch.rand(4, 5, generator=_g(13), dtype=torch.float64) * 3
    ref = -torch.rand(4, 5, generator=_g(14), dtype=torch.float64) * 3
    mask = (torch.arange(5) < torch.tensor([[5], [2], [3], [4]])).long()
    rewards, beta = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64), 0.15
    expected = rewards - beta * torch.where(mask.bool(), logp - ref, torch.zeros(())).sum(-1)
    return (rewards, logp, ref, mask, beta), expected


def _pg_loss():
    logp = -torch.rand(4, 5, generator=_g(15), dtype=torch.float64) * 3
    mask = (torch.arange(5) < torch.tensor([[5], [2], [3], [4]])).long()
    advantages = torch.tensor([0.7, -1.2, 0.4, 0.9], dtype=torch.float64)
    return (logp, mask, advantages), -(advantages * torch.where(mask.bool(), logp, torch.zeros(())).sum(-1)).mean()


def _rft_gradient():
    logits = torch.randn(4, generator=_g(16), dtype=torch.float64)
    samples = torch.tensor([0, 2, 1, 2, 3, 0, 2, 1])
    rewards = torch.tensor([0, 1, 0, 1, 0, 0, 1, 1])
    theta = logits.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(torch.log_softmax(theta, -1)[samples[rewards > 0]].mean(), theta)
    return (logits, samples, rewards), grad


def _entropy():
    logits, kappa = torch.randn(5, generator=_g(17), dtype=torch.float64), 1.3
    log_probs = torch.log_softmax(kappa * logits, -1)
    return (logits, kappa), -(log_probs.exp() * log_probs).sum()


def _two_token_model(seed):
    theta = torch.randn(2, generator=_g(seed), dtype=torch.float64)
    second = torch.softmax(torch.randn(2, 2, generator=_g(seed + 1), dtype=torch.float64), -1)
    rewards = torch.rand(2, 2, generator=_g(seed + 2), dtype=torch.float64) * 2
    return theta, second, rewards


def _bandit_objective():
    theta, second, rewards = _two_token_model(18)
    return (theta, second, rewards), (torch.softmax(theta, -1)[:, None] * second * rewards).sum()


def _token_level_gradient():
    theta, second, rewards = _two_token_model(21)
    first = torch.softmax(theta, -1)
    scores = torch.eye(2, dtype=first.dtype) - first
    return (theta, second, rewards), ((first[:, None] * second * rewards).sum(1)[:, None] * scores).sum(0)


def _kl_objective():
    rng = np.random.default_rng(24)
    policy, ref, rewards, beta = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5)), rng.normal(0, 1, 5), 0.4
    return (policy, ref, rewards, beta), float(policy @ rewards - beta * np.sum(policy * np.log(policy / ref)))


def _token_level_optimum():
    rng = np.random.default_rng(25)
    first, second = rng.dirichlet(np.ones(2)), rng.dirichlet(np.ones(2), size=2)
    rewards, beta = rng.normal(0, 1, (2, 2)), 0.6
    V = beta * np.logaddexp.reduce(np.log(second) + rewards / beta, axis=1)
    V0 = beta * np.logaddexp.reduce(np.log(first) + V / beta)
    return (first, second, rewards, beta), np.exp(np.log(first) + (V - V0) / beta)


def _estimator_gradients():
    theta = torch.tensor([0.5, 0.2, 0.3], dtype=torch.float64).log()
    ref = torch.tensor([0.3, 0.45, 0.25], dtype=torch.float64)
    t = theta.clone().requires_grad_(True)
    logp = torch.log_softmax(t, -1)
    log_ratio = logp - ref.log()
    k3 = torch.exp(-log_ratio) - 1 + log_ratio
    return (theta, ref), torch.autograd.grad((logp.exp().detach() * k3).sum(), t)[0]


def _temperature_for_target():
    from lmpolicy.per_student import variant_answers, variants
    params = variants.for_exercise("ex11_2b", STUDENT)
    answer = variant_answers.answer("ex11_2b", STUDENT)["temperature_at_target"]
    return (np.asarray(params.logits), params.target), answer


def _variant(key):
    def case():
        from lmpolicy.per_student import variant_answers
        numbers = [v for v in variant_answers.answer(key, STUDENT).values()
                   if isinstance(v, float) and abs(v) > 1e-3]
        return (key, STUDENT), numbers
    return case


# exercise key -> its hidden tests' inputs (representative ones) and its reference output
CASES = {
    "nb01_softmax": _softmax_case, "ex11_1a": _sequence_logprob_1a, "ex11_1a variant": _variant("ex11_1a"),
    "task2": _greedy, "nb02_top_k": _top_k, "nb02_top_p": _top_p, "ex11_2b variant": _variant("ex11_2b"),
    "ex11_2b": _temperature_for_target,
    "ex11_3c": _kl_chain_rule, "task4": _tilted_optimum, "ex11_5b variant": _variant("ex11_5b"),
    "ex11_8b variant": _variant("ex11_8b"), "ex11_9c variant": _variant("ex11_9c"),
    "task3": _k3, "ex11_4c variant": _variant("ex11_4c"), "ex11_9d variant": _variant("ex11_9d"),
    "task1a": _response_logprobs, "task1b": _masked_sum,
    "nb08_baseline": _baseline, "nb08_kl_reward": _kl_reward, "nb08_pg_loss": _pg_loss,
    "ex11_1c": _rft_gradient, "ex11_2c": _entropy, "ex11_3a": _bandit_objective, "ex11_3b": _token_level_gradient,
    "task4 kl_objective": _kl_objective, "task5": _token_level_optimum, "ex11_6c": _estimator_gradients,
}
NOTEBOOKS = sorted(path.stem for path in catalogue.source_folder().glob("*.ipynb"))


def cases_of(notebook: str) -> dict:
    keys = set(library_view.notebook_exercises(notebook))
    return {name: CASES[name]() for name in CASES if name.split()[0] in keys}


WALKER = r'''
import importlib, inspect, itertools, json, math, os, pkgutil, signal, sys, types
import numpy as np
import torch
from torch.overrides import TorchFunctionMode

sys.argv = ["walk", "--help"]  # a main() that parses the command line stops at once
cases = torch.load(os.environ["WALK_CASES"], weights_only=False)
LITERALS = ("k1", "k2", "k3")  # the estimator names the notebooks print


class Slow(BaseException):
    pass


def alarm(*_):
    raise Slow()


signal.signal(signal.SIGALRM, alarm)


def as_array(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float64).numpy() if value.dtype != torch.bool else None
    if isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
        return value.astype(float)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return np.asarray(float(value))
    return None


def holds(value, reference, depth=0):
    """Whether value (or what it holds, two levels down) is the reference."""
    if isinstance(reference, list):  # per-student numbers: any one of them
        return any(holds(value, r, depth) for r in reference)
    array = as_array(value)
    if array is not None:
        ref = np.asarray(reference, dtype=float)
        if array.shape == ref.shape and np.all(np.isfinite(ref) == np.isfinite(array)):
            finite = np.isfinite(ref)
            return bool(np.array_equal(array[~finite], ref[~finite]) and np.allclose(array[finite], ref[finite], rtol=1e-6, atol=1e-9))
        return False
    if depth >= 2:
        return False
    if isinstance(value, dict):
        return any(holds(v, reference, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds(v, reference, depth + 1) for v in value[:50])
    fields = getattr(value, "__dataclass_fields__", None) or getattr(value, "_fields", None)
    if fields:
        return any(holds(getattr(value, f, None), reference, depth + 1) for f in fields)
    return False


class Seen(TorchFunctionMode):
    """Every torch function's result on the way, checked against the reference."""
    reference = None
    hit = False

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not Seen.hit and Seen.reference is not None:
            try:
                Seen.hit = holds(result, Seen.reference)
            except Exception:
                pass
        return result


def positional_arity(fn):
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 5, False
    count, var = 0, False
    for p in parameters:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            count += 1
        elif p.kind == p.VAR_POSITIONAL:
            var = True
    return (min(count, 6) if not var else 6), var


def arrangements(fn, inputs):
    """The inputs in every order, of every length up to the function's positional arity, each bare and with
    dim=-1; then each shorter one with one of the literals after it."""
    arity, _ = positional_arity(fn)
    for size in range(0, min(arity, len(inputs)) + 1):
        for args in itertools.permutations(inputs, size):
            yield list(args), {}
            yield list(args), {"dim": -1}
    for size in range(0, min(arity - 1, len(inputs)) + 1):
        for args in itertools.permutations(inputs, size):
            for literal in LITERALS:
                yield [*args, literal], {}


STATE = (dict(os.environ), os.getcwd(), list(sys.argv), sys.stdout, sys.stderr, torch.get_default_dtype())


def restore():
    """What a call may have changed of the process (a command line's main, a demo): put back."""
    environ, cwd, argv, stdout, stderr, dtype = STATE
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)
    os.chdir(cwd)
    sys.argv[:] = argv
    sys.stdout, sys.stderr = stdout, stderr
    torch.set_default_dtype(dtype)


def call(fn, args, kwargs):
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with Seen():
            return fn(*[a.clone() if isinstance(a, torch.Tensor) else (a.copy() if isinstance(a, np.ndarray) else a) for a in args], **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        restore()


def reachable():
    import lmpolicy
    names = ["lmpolicy"] + [m.name for m in pkgutil.walk_packages(lmpolicy.__path__, "lmpolicy.")]
    modules, functions = [], {}
    for name in names:
        try:
            module = importlib.import_module(name)
        except BaseException:
            continue
        modules.append(name)
        for attribute, value in list(vars(module).items()):
            if getattr(value, "__module__", None) != name:
                continue
            if inspect.isclass(value):
                functions[f"{name}.{attribute}"] = value
                for member, raw in vars(value).items():
                    inner = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
                    if isinstance(raw, property):
                        inner = raw.fget
                    if isinstance(inner, types.FunctionType):
                        functions[f"{name}.{attribute}.{member}"] = inner
            elif callable(value):
                functions[f"{name}.{attribute}"] = value
    return modules, functions


modules, functions = reachable()
tried, answers = 0, []
for exercise, (inputs, reference) in cases.items():
    Seen.reference = reference
    for qualname, fn in functions.items():
        for args, kwargs in arrangements(fn, inputs):
            tried += 1
            Seen.hit = False
            try:
                result = call(fn, args, kwargs)
            except BaseException:
                result = None
            found = Seen.hit or holds(result, reference)
            if not found and callable(result) and not inspect.isclass(result) and isinstance(result, types.FunctionType):
                for again_args, again_kwargs in arrangements(result, inputs):
                    tried += 1
                    Seen.hit = False
                    try:
                        found = holds(call(result, again_args, again_kwargs), reference) or Seen.hit
                    except BaseException:
                        found = Seen.hit
                    if found:
                        break
            if found:
                answers.append([exercise, qualname, len(args), sorted(kwargs)])
                break
with open(os.environ["WALK_OUT"], "w") as out:  # not stdout: a walked function may write there at length
    json.dump({"modules": modules, "functions": len(functions), "tried": tried, "answers": answers}, out)
'''


def walk(view_parent: Path, notebook: str, tmp_path: Path) -> dict:
    """Call every function of the view in ``view_parent`` on ``notebook``'s exercises (see the module docstring)."""
    from lmpolicy.per_student import variant_answers

    cases_file = tmp_path / f"{notebook}.cases.pt"
    torch.save(cases_of(notebook), cases_file)
    out_file = tmp_path / f"{notebook}.walk.json"
    env = {**os.environ, "PYTHONPATH": str(view_parent), "WALK_CASES": str(cases_file), "WALK_OUT": str(out_file),
           "LMPOLICY_STUDENT_ID": STUDENT, "LMPOLICY_VARIANT_PARAMS": variant_answers.drawn_for(STUDENT),
           "MPLBACKEND": "Agg", "NBGRADER_EXECUTION": "autograde"}
    workdir = tmp_path / f"{notebook}.cwd"
    workdir.mkdir()
    ran = subprocess.run([sys.executable, "-c", WALKER], capture_output=True, text=True, cwd=workdir, env=env,
                         stdin=subprocess.DEVNULL)
    assert ran.returncode == 0 and out_file.is_file(), ran.stderr[-3000:]
    return json.loads(out_file.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_no_function_a_notebooks_grading_kernel_can_reach_answers_one_of_its_exercises(notebook, tmp_path):
    view = library_view.build(library_view.library_folder(), notebook, tmp_path / "view")
    assert not cases_of(notebook) or all(name.split()[0] in library_view.notebook_exercises(notebook)
                                         for name in cases_of(notebook))
    walked = walk(view.parent, notebook, tmp_path)
    print(f"{notebook}: {len(walked['modules'])} modules, {walked['functions']} functions walked, "
          f"{walked['tried']} calls tried, answers: {walked['answers']}")
    assert walked["functions"] > 0 and walked["answers"] == [], walked["answers"]


@pytest.mark.slow
def test_the_walk_finds_the_oracles_of_the_whole_library(tmp_path):
    """The walk has teeth: on the whole library (what every grading kernel saw before the views were allowlists,
    less a hand-written list of functions), it finds the sampler answering notebook 01's softmax on its way,
    and the answer key answering 11.1(a)."""
    walked = walk(library_view.library_folder().parent, "01_policy_softmax", tmp_path)
    found = {(exercise, name) for exercise, name, *_ in walked["answers"]}
    assert ("nb01_softmax", "lmpolicy.tinylm.generate.sample_next_token") in found, found
    assert ("nb01_softmax", "lmpolicy.exact.temperature.softmax") in found, found
    assert ("ex11_1a variant", "lmpolicy.per_student.variant_answers.answer") in found, found
