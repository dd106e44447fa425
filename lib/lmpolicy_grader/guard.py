"""The tamper guard: an IPython extension loaded by the grading kernel before any student code,
for the notebooks whose tests still run in that kernel.

A notebook in ``GradingExecute.trusted_notebooks`` does without it: its tests run in a process of
their own, which the submission cannot rebind (``trusted_tests.py``), and its kernel does not load
the guard. For the others:

When the kernel starts it imports numpy, torch and the lmpolicy modules the tests use, and
records what every function in them is. Before each test cell the grader asks ``verdict(...)``
whether anything the tests rely on has been rebound since:

- a function or class in numpy, numpy.testing, torch, torch.testing, math, builtins or lmpolicy
  replaced (``np.allclose = lambda *a, **k: True``), or its code swapped (``f.__code__ = ...``);
- a method of ``torch.Tensor`` replaced;
- a protected module replaced in ``sys.modules``;
- a builtin the test cell uses shadowed in the notebook's namespace (``abs = lambda x: 0``).

The verdict lists what changed and puts the originals back, so one rebinding costs the exercise
whose tests ran next, and the later exercises are graded with the real functions again.

This catches rebinding, the cheap way to fake a pass. Code running in the same process can always
do something more devious (an input transformer, a tracer, a custom exception handler), which is
why the tests move out of it notebook by notebook.
"""
from __future__ import annotations

import builtins
import importlib
import json
import pkgutil
import sys
import types

# Modules whose functions decide whether a test passes.
PROTECTED_MODULES = ("math", "numpy", "numpy.testing", "numpy.linalg", "torch", "torch.testing",
                     "torch.linalg", "torch.nn.functional")
# lmpolicy subpackages the tests never rely on (interactive demos, the grader itself, entry points).
UNPROTECTED_LMPOLICY = ("lmpolicy.demos", "lmpolicy_grader", "lmpolicy.tinylm.pretraining")
PROTECTED_BUILTINS = ("abs", "all", "any", "bool", "callable", "dict", "float", "getattr", "hasattr",
                      "int", "isinstance", "issubclass", "len", "list", "max", "min", "print", "range",
                      "repr", "round", "set", "sorted", "str", "sum", "tuple", "type", "zip",
                      "__import__")

_snapshot: dict = {}


def _is_guarded_value(value) -> bool:
    return callable(value) or isinstance(value, types.ModuleType)


def _lmpolicy_module_names() -> list[str]:
    import lmpolicy
    names = ["lmpolicy"]
    for info in pkgutil.walk_packages(lmpolicy.__path__, "lmpolicy."):
        if not info.name.startswith(UNPROTECTED_LMPOLICY):
            names.append(info.name)
    return names


def take_snapshot() -> None:
    """Import the protected modules and record their functions (called once, at kernel start)."""
    modules = {}
    for name in PROTECTED_MODULES + tuple(_lmpolicy_module_names()):
        try:
            modules[name] = importlib.import_module(name)
        except Exception:  # a module that cannot import is not used by the tests either
            continue
    attributes, codes, classes = {}, {}, {}
    for name, module in modules.items():
        attributes[name] = {key: value for key, value in vars(module).items() if _is_guarded_value(value)}
        if name == "lmpolicy" or name.startswith("lmpolicy."):
            for key, value in attributes[name].items():
                if isinstance(value, types.FunctionType):
                    codes[f"{name}.{key}"] = (value, value.__code__, value.__defaults__, value.__kwdefaults__)
                elif isinstance(value, type) and value.__module__ == name:
                    classes[f"{name}.{key}"] = (value, dict(vars(value)))
    if "torch" in modules:
        tensor = modules["torch"].Tensor
        classes["torch.Tensor"] = (tensor, dict(vars(tensor)))
    _snapshot.update(modules=modules, attributes=attributes, codes=codes, classes=classes,
                     builtins={key: getattr(builtins, key) for key in PROTECTED_BUILTINS})


def _changes(user_namespace: dict, names_used) -> list[tuple[str, callable]]:
    """What differs from the snapshot, each with a function that puts the original back."""
    found = []
    for name, module in _snapshot["modules"].items():
        if sys.modules.get(name) is not module:
            found.append((f"the module {name} was replaced", lambda n=name, m=module: sys.modules.__setitem__(n, m)))
        current = vars(module)
        for key, original in _snapshot["attributes"][name].items():
            if current.get(key) is not original:
                found.append((f"{name}.{key} was rebound", lambda m=module, k=key, o=original: setattr(m, k, o)))
    for qualname, (function, code, defaults, kwdefaults) in _snapshot["codes"].items():
        if function.__code__ is not code or function.__defaults__ is not defaults \
                or function.__kwdefaults__ is not kwdefaults:
            def put_back(f=function, c=code, d=defaults, k=kwdefaults):
                f.__code__, f.__defaults__, f.__kwdefaults__ = c, d, k
            found.append((f"the code of {qualname} was replaced", put_back))
    for qualname, (cls, members) in _snapshot["classes"].items():
        current = vars(cls)
        for key, original in members.items():
            if _is_guarded_value(original) and current.get(key) is not original:
                found.append((f"{qualname}.{key} was rebound", lambda c=cls, k=key, o=original: setattr(c, k, o)))
    for key, original in _snapshot["builtins"].items():
        if getattr(builtins, key) is not original:
            found.append((f"the builtin {key} was rebound", lambda k=key, o=original: setattr(builtins, k, o)))
    for key in names_used:
        if key in _snapshot["builtins"] and key in user_namespace \
                and user_namespace[key] is not _snapshot["builtins"][key]:
            found.append((f"the name {key} (a builtin the tests use) was rebound in the notebook",
                          lambda k=key: user_namespace.pop(k, None)))
    return found


def verdict(names_used=()) -> str:
    """JSON list of what was tampered with since the kernel started; puts the originals back."""
    if not _snapshot:
        return json.dumps(["the tamper guard was not loaded in this kernel"])
    shell = getattr(builtins, "get_ipython", lambda: None)()
    user_namespace = shell.user_ns if shell is not None else {}
    found = _changes(user_namespace, names_used)
    for _, put_back in found:
        put_back()
    return json.dumps(sorted({message for message, _ in found}))


def load_ipython_extension(shell) -> None:  # noqa: ARG001  (IPython's extension hook)
    take_snapshot()
