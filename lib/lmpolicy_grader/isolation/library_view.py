"""What the grading kernel sees of the student library: exactly what the notebook's own cells use, with
nothing that computes one of its graded exercises.

The sandbox shows the kernel a generated copy of ``lmpolicy`` (its own folder, mounted over the real one).
For each notebook the copy holds an allowlist derived from the notebook itself (``needed_modules``):

* the ``lmpolicy`` modules that the cells a student is given import (every code cell that is not a test,
  an answer cell's reference solution left out: the imports a reference relies on are in the cells given
  to students), plus ``lmpolicy.notebook.checks``, which the grading kernel's channel imports before any cell runs;
* and, transitively, the modules those import at module level (what importing them needs). The
  granularity is the module: a module's module-level imports are what it needs to exist, while an import
  inside a function is an optional part, which in the view says it is not there if a cell ever reaches it.
  (A function-level call graph would keep less, but the library's classes, dataclass defaults and demo
  registries reach functions by means a static call graph misses; the module is the unit a notebook's
  ``import`` names.)

Every other module of the library is absent: its file in the view is one line that raises ImportError
"<module> is not available while grading: <why>". Within the modules kept, every library function that
``lmpolicy.exercises`` declares as a shortcut of one of the notebook's exercises has its body replaced by a
raise of ``LibraryShortcutUsed`` ("not available while grading: ... asks you to write it yourself"), its
signature and docstring kept; and a module that ``lmpolicy.exercises`` declares whole (the per-student
answer key, ``lmpolicy.per_student.variant_answers``) is in no view, whatever imports it: the grading kernel takes the
student's parameters from the grader (``students.kernel_environments``). The real bodies are in no file
the kernel can read, so neither a computed name, nor a copy of a code object, nor ``inspect.getsource``
and ``exec``, nor a read of a file by its path can reach them. ``tests/lmpolicy_grader/isolation/
test_no_oracle.py`` calls every function each view holds on every exercise's hidden-test inputs and finds
none that answers.

Views are built once per library source, course notebooks and this module (their hash) and notebook, in a
cache folder of this user, and hard-linked into each sandbox's private folder (``install``): a kernel
started before its notebook is known shows the strictest view (``lmpolicy.notebook.checks`` and what it imports,
nothing else) until ``install`` puts its notebook's view in place, before any cell runs (only
``lmpolicy.notebook.checks`` and what it imports are loaded by then, and they are the same in every view).
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

from lmpolicy.exercises import registry
from lmpolicy.notebook import catalogue
from lmpolicy.notebook.catalogue import label

STRICTEST = "_strictest"  # the view of a kernel whose notebook is not known yet: lmpolicy.notebook.checks and its imports
ALWAYS = ("lmpolicy", "lmpolicy.notebook.checks")  # what the grading kernel's own channel imports (call_server)
MESSAGE = "{name} is not available while grading: {exercises} {asks} you to write it yourself"
ABSENT = "{name} is not available while grading: {why}"
WHY_ANSWER_KEY = "it is the answer key of {exercises}, which stays with the grader"
WHY_UNUSED = "the grading kernel holds only the library modules that {notebook}'s own cells use"
WHY_UNKNOWN = "the grading kernel of a notebook that is not one of the course's holds only lmpolicy.notebook.checks"


def library_folder() -> Path:
    """The real lmpolicy package folder (the one the sandbox covers with a view)."""
    import lmpolicy
    return Path(lmpolicy.__file__).resolve().parent


def _files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and "__pycache__" not in path.relative_to(folder).parts)


def _module_name(folder: Path, path: Path) -> str:
    return ".".join(("lmpolicy", *path.relative_to(folder).with_suffix("").parts)).removesuffix(".__init__")


def _modules(folder: Path) -> dict[str, Path]:
    """Every module of the library in ``folder``, by dotted name."""
    return {_module_name(folder, path): path for path in _files(folder) if path.suffix == ".py"}


# --- what a notebook uses -------------------------------------------------------------------------

SOLUTION_REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION.*?^[ \t]*### END SOLUTION[^\n]*$", re.M | re.S)


def given_sources(notebook_json: dict) -> list[str]:
    """The code a student is given of a notebook, as the grading kernel runs it: every code cell but the
    tests (they run in the trusted kernel), each answer cell without its reference solution."""
    sources = []
    for cell in notebook_json["cells"]:
        grader = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] != "code" or (grader.get("grade") and not grader.get("solution")):
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        sources.append(SOLUTION_REGION.sub("", text))
    return sources


def _imports(tree: ast.AST, module_level_only: bool) -> set[str]:
    """The lmpolicy modules (and ``from`` names that may be modules) an AST imports: at module level only
    (not inside a function or lambda), or everywhere."""
    found: set[str] = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if module_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names if alias.name.split(".")[0] == "lmpolicy")
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module \
                    and child.module.split(".")[0] == "lmpolicy":
                found.add(child.module)
                found.update(f"{child.module}.{alias.name}" for alias in child.names)
            visit(child)
    visit(tree)
    return found


def _parse_cell(source: str) -> ast.AST:
    """A cell's code, its IPython magics and shell lines left out."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    return ast.parse("\n".join(lines))


def _with_packages(names: set[str], modules: dict[str, Path]) -> set[str]:
    """``names`` that are modules of the library, each with the packages that hold it."""
    found = set()
    for name in names:
        if name not in modules:
            continue
        parts = name.split(".")
        found.update(".".join(parts[:cut]) for cut in range(1, len(parts) + 1))
    return found


def needed_modules(folder: Path, notebook: str | None) -> set[str]:
    """The modules of ``notebook``'s view: what its given cells import (and ``ALWAYS``), closed over the
    module-level imports of the library, without a module declared whole in ``lmpolicy.exercises``."""
    modules = _modules(folder)
    wanted = set(ALWAYS)
    path = None if notebook is None else catalogue.source_folder() / f"{notebook}.ipynb"
    if path is not None and path.is_file():
        for source in given_sources(catalogue.read_notebook(path)):
            wanted |= _imports(_parse_cell(source), module_level_only=False)
    excluded = set(registry.library_modules())
    todo, kept = sorted(_with_packages(wanted, modules) - excluded), set()
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept.add(name)
        tree = ast.parse(modules[name].read_text(), str(modules[name]))
        todo.extend(sorted(_with_packages(_imports(tree, module_level_only=True), modules) - excluded - kept))
    return kept


def notebook_exercises(notebook: str | None) -> list[str]:
    """The exercise keys of ``notebook`` (None, or not one of the course's notebooks: none)."""
    path = None if notebook is None else catalogue.source_folder() / f"{notebook}.ipynb"
    if path is None or not path.is_file():
        return []
    return [exercise.key for exercise in catalogue.notebook_exercises(notebook, catalogue.read_notebook(path))]


def unavailable(notebook: str | None) -> dict[str, list[str]]:
    """``module:qualname`` -> the exercise keys it answers, of the declared functions of ``notebook``'s
    exercises (they are blanked where their module is kept, absent with it otherwise)."""
    return registry.library_functions(notebook_exercises(notebook))


def source_hash(folder: Path | None = None) -> str:
    """What a view is made from: every file of the library, the course's source notebooks and this module."""
    folder = folder or library_folder()
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in _files(folder):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    for path in sorted(catalogue.source_folder().glob("*.ipynb")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
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
                raising = ast.parse(f"raise __import__('lmpolicy.notebook.checks', fromlist=['checks'])"
                                    f".LibraryShortcutUsed({message!r})").body
                docstring = node.body[:1] if ast.get_docstring(node, clean=False) is not None else []
                node.body = docstring + raising
    visit(tree.body, "")
    if left:
        raise ValueError(f"library_view: {module} has no function {sorted(left)} (lmpolicy.exercises names it)")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _absent(module: str, notebook: str | None) -> str:
    """The file of a module the view lacks: importing it says so, and why."""
    answers = registry.library_modules().get(module)
    if answers:
        why = WHY_ANSWER_KEY.format(exercises=", ".join(dict.fromkeys(label(k) for k in answers)))
    elif notebook is not None and notebook_exercises(notebook):
        why = WHY_UNUSED.format(notebook=notebook)
    else:
        why = WHY_UNKNOWN
    message = ABSENT.format(name=module, why=why)
    return f'"""Not in this grading kernel."""\nraise ImportError({message!r}, name={module!r})\n'


def build(folder: Path, notebook: str | None, into: Path) -> Path:
    """Write the view of ``notebook`` of the library in ``folder`` as ``into``/lmpolicy; returns it."""
    kept = needed_modules(folder, notebook)
    by_module: dict[str, dict[str, list[str]]] = {}
    for function, keys in unavailable(notebook).items():
        module, qualname = function.split(":")
        by_module.setdefault(module, {})[qualname] = keys
    modules = _modules(folder)
    for module in by_module:
        if module not in modules:
            raise ValueError(f"library_view: no module {module} in {folder} (lmpolicy.exercises names it)")
    view = into / "lmpolicy"
    for path in _files(folder):
        target = view / path.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix != ".py":
            shutil.copy2(path, target)  # data (the checkpoint): no code
            continue
        module = _module_name(folder, path)
        if module not in kept:
            target.write_text(_absent(module, notebook))
        elif module in by_module:
            target.write_text(_blank(path.read_text(), module, by_module[module], str(path)))
        else:
            shutil.copy2(path, target)
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
