"""What the grading kernel sees of the student library: lmpolicy without the answers to the graded exercises.

The sandbox shows the kernel a generated copy of ``lmpolicy`` (its own folder, mounted over the real one)
in which every library function that solves an exercise of the notebook being graded outright raises
``LibraryShortcutUsed`` ("not available while grading: write it yourself"), its signature and docstring
kept. The real body is in no file the kernel can read, so neither a computed name, nor a copy of its code
object, nor ``inspect.getsource`` and ``exec``, nor a read of the file by its path can reach it.

``UNAVAILABLE`` is the one list: per notebook, per exercise key, the functions that answer it. The
notebooks' own cells (set-up, demos, reference answers) need none of them in the grading kernel: a demo
that would computes without it, or is skipped there with a line saying so; and ``lmpolicy.variants``,
which draws the student's own numbers with the exact solvers, takes them drawn by the grader there
(``students.kernel_environments``). The no-credit rule read from the source (``trusted_tests.no_credit``)
is a second line.

Views are built once per library source (its hash) and notebook, in a cache folder of this user, and
hard-linked into each sandbox's private folder (``install``): a kernel started before its notebook is
known shows the strictest view (every exercise's functions gone) until ``install`` puts its notebook's
view in place, before any cell runs (only ``lmpolicy.checks`` and what it imports are loaded by then,
and they are the same in every view).
"""
from __future__ import annotations

import ast
import compileall
import filecmp
import hashlib
import os
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from lmpolicy.catalogue import label

GENERATE = "lmpolicy.tinylm.generate"
LOGPROBS = "lmpolicy.tinylm.logprobs"
REINFORCE = "lmpolicy.tinylm.reinforce"
TEMPERATURE = "lmpolicy.exact.temperature"
TILTING = "lmpolicy.exact.tilting"
KL = "lmpolicy.exact.kl"

# notebook -> exercise key -> the library functions ("module:qualname") that answer that exercise outright.
UNAVAILABLE: dict[str, dict[str, tuple[str, ...]]] = {
    "01_policy_softmax": {
        "nb01_softmax": (f"{TEMPERATURE}:softmax", f"{TEMPERATURE}:log_softmax"),
        "ex11_1a": (f"{LOGPROBS}:sequence_logprob", f"{LOGPROBS}:response_logprobs"),
    },
    "02_temperature": {
        "task2": (f"{GENERATE}:sample_next_token", f"{GENERATE}:generate"),
        "nb02_top_k": (f"{GENERATE}:sample_next_token", f"{GENERATE}:generate"),
        "nb02_top_p": (f"{GENERATE}:sample_next_token", f"{GENERATE}:generate"),
    },
    "04_two_mdp_views": {
        "ex11_3a": (f"{TILTING}:expected_reward",),
        "ex11_3b": (f"{TILTING}:expected_reward",),
        "ex11_3c": (f"{KL}:kl", f"{KL}:sequence_kl", f"{KL}:chain_rule_kl"),
    },
    "05_tilted_optimum": {
        "task4": (f"{TILTING}:tilted_optimum", f"{TILTING}:kl_objective", f"{TILTING}:frontier",
                  f"{TEMPERATURE}:power_distribution"),
        "task5": (f"{TILTING}:soft_values", f"{TILTING}:token_level_optimum"),
    },
    "06_kl_estimators": {
        "task3": (f"{KL}:kl_estimates",),
        "ex11_6c": (f"{KL}:kl_estimates",),
    },
    "07_logprob_plumbing": {
        "task1a": (f"{LOGPROBS}:response_logprobs",),
        "task1b": (f"{LOGPROBS}:sequence_logprob",),
    },
    "08_tinylm_reinforce": {
        "nb08_baseline": (f"{REINFORCE}:leave_one_out_baseline",),
        "nb08_kl_reward": (f"{REINFORCE}:kl_penalized_rewards",),
        "nb08_pg_loss": (f"{REINFORCE}:policy_gradient_loss",),
    },
}

STRICTEST = "_strictest"  # the view of a kernel whose notebook is not known yet: every exercise's functions gone
MESSAGE = "{name} is not available while grading: {exercises} {asks} you to write it yourself"


def library_folder() -> Path:
    """The real lmpolicy package folder (the one the sandbox covers with a view)."""
    import lmpolicy
    return Path(lmpolicy.__file__).resolve().parent


def unavailable(notebook: str | None) -> dict[str, list[str]]:
    """``module:qualname`` -> the exercise keys it answers, of the functions ``notebook``'s view lacks
    (None, a notebook not known yet: every notebook's; a notebook not in the table: none)."""
    chosen = UNAVAILABLE if notebook is None else {notebook: UNAVAILABLE.get(notebook, {})}
    found: dict[str, list[str]] = {}
    for exercises in chosen.values():
        for key, functions in exercises.items():
            for function in functions:
                found.setdefault(function, []).append(key)
    return found


def _files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and "__pycache__" not in path.relative_to(folder).parts)


def source_hash(folder: Path | None = None) -> str:
    """What a view is made from: every file of the library, this module and the tables above."""
    folder = folder or library_folder()
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in _files(folder):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _blank(source: str, module: str, functions: dict[str, list[str]], filename: str) -> str:
    """``source`` with each named function's body replaced by its docstring and a raise."""
    tree = ast.parse(source, filename)
    left = dict(functions)

    def visit(body, prefix):
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and f"{prefix}{node.name}" in left:
                keys = left.pop(f"{prefix}{node.name}")
                exercises = list(dict.fromkeys(label(k) for k in keys))
                message = MESSAGE.format(name=f"{module}.{prefix}{node.name}", exercises=" and ".join(exercises),
                                         asks="asks" if len(exercises) == 1 else "ask")
                raising = ast.parse(f"raise __import__('lmpolicy.checks', fromlist=['checks'])"
                                    f".LibraryShortcutUsed({message!r})").body
                docstring = node.body[:1] if ast.get_docstring(node, clean=False) is not None else []
                node.body = docstring + raising
    visit(tree.body, "")
    if left:
        raise ValueError(f"library_view: {module} has no function {sorted(left)} (UNAVAILABLE names it)")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def build(folder: Path, notebook: str | None, into: Path) -> Path:
    """Write the view of ``notebook`` of the library in ``folder`` as ``into``/lmpolicy; returns it."""
    by_module: dict[str, dict[str, list[str]]] = {}
    for function, keys in unavailable(notebook).items():
        module, qualname = function.split(":")
        by_module.setdefault(module, {})[qualname] = keys
    view = into / "lmpolicy"
    for path in _files(folder):
        relative = path.relative_to(folder)
        target = view / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        module = ".".join(("lmpolicy", *relative.with_suffix("").parts)).removesuffix(".__init__")
        if path.suffix == ".py" and module in by_module:
            target.write_text(_blank(path.read_text(), module, by_module.pop(module), str(path)))
        else:
            shutil.copy2(path, target)
    if by_module:
        raise ValueError(f"library_view: no module {sorted(by_module)} in {folder} (UNAVAILABLE names it)")
    compileall.compile_dir(str(view), quiet=1, workers=1)  # the view's own bytecode: imports as fast as the real one
    for path in [view, *view.rglob("*")]:  # readable by the kernel's uid
        path.chmod(0o755 if path.is_dir() else 0o644)
    return view


def cache_root() -> Path:
    """This user's folder of built views (not writable by anyone else)."""
    root = Path(tempfile.gettempdir()) / f"lmpolicy-library-views-{os.geteuid()}"
    root.mkdir(mode=0o711, exist_ok=True)
    if root.is_symlink() or root.stat().st_uid != os.geteuid() or root.stat().st_mode & 0o022:
        raise RuntimeError(f"{root} is not this user's own folder: cannot keep the library views there")
    return root


@lru_cache(maxsize=None)
def _view_for(notebook_variant: str, digest: str) -> Path:
    folder, root = library_folder(), cache_root()
    done = root / digest / notebook_variant / "lmpolicy"
    if done.is_dir():
        return done
    (root / digest).mkdir(mode=0o711, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{notebook_variant}.", dir=root / digest))
    build(folder, None if notebook_variant == STRICTEST else notebook_variant, building)
    building.chmod(0o711)
    try:
        os.rename(building, root / digest / notebook_variant)
    except OSError:  # another process built it first: use that one
        shutil.rmtree(building, ignore_errors=True)
    return done


def view(notebook: str | None) -> Path:
    """The folder to show as lmpolicy to the kernel of ``notebook`` (None: not known yet), built once
    per library source and notebook."""
    if notebook is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", notebook):
        raise ValueError(f"library_view: {notebook!r} is not a notebook name")
    variant = STRICTEST if notebook is None else notebook
    return _view_for(variant, _current_hash())


_hash_seen: dict[tuple, str] = {}


def _current_hash() -> str:
    """The library's source hash, computed again only when a file of it changed (size or mtime)."""
    folder = library_folder()
    signature = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in _files(folder))
    if signature not in _hash_seen:
        _hash_seen.clear()
        _hash_seen[signature] = source_hash(folder)
    return _hash_seen[signature]


def install(view_folder: Path, target: Path) -> None:
    """Make ``target`` hold exactly ``view_folder``'s files (hard links where the file system allows);
    files whose bytes are already the same are left alone, so a kernel that has imported them sees no change."""
    target.mkdir(mode=0o755, exist_ok=True)
    target.chmod(0o755)
    wanted = {path.relative_to(view_folder) for path in view_folder.rglob("*")}
    for relative in sorted(wanted):
        source, placed = view_folder / relative, target / relative
        if source.is_dir():
            placed.mkdir(mode=0o755, exist_ok=True)
            continue
        if placed.is_file() and not placed.is_symlink() and filecmp.cmp(source, placed, shallow=True):
            continue
        staging = placed.with_name(f".{placed.name}.new")
        try:
            os.link(source, staging)
        except OSError:
            shutil.copy2(source, staging)
            staging.chmod(0o644)
        os.replace(staging, placed)
    for path in sorted(target.rglob("*"), reverse=True):
        if path.relative_to(target) not in wanted:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


# --- which notebook this grading process grades now (set by the trusted test runner, read at kernel start) ---

_graded_notebook: list[str | None] = [None]


def grading(notebook: str | None) -> None:
    """Say which notebook this process grades now (its grading kernel shows that notebook's view)."""
    _graded_notebook[0] = notebook


def graded_notebook() -> str | None:
    return _graded_notebook[0]
