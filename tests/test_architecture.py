"""The shape of lib/: docs/architecture.md's module table and the tree name the same modules, no import cycle,
the grader on the student library's public surface."""
import re

from .conftest import ROOT

LIB = ROOT / "lib"
DOC = ROOT / "docs" / "architecture.md"


def _tree() -> set[tuple[str, str]]:
    """(package, module) for every .py file under lib/; a package's __init__ is its own row."""
    modules = set()
    for path in LIB.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        package = ".".join(path.relative_to(LIB).parent.parts)
        modules.add((package, path.stem))
    return modules


def _table() -> set[tuple[str, str]]:
    """(package, module) for every row of the "Modules" table (a row may name several modules)."""
    text = DOC.read_text()
    section = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, "docs/architecture.md has no module table under '## Modules'"
    named = set()
    for row in rows:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]]
        packages, modules = re.findall(r"`([^`]+)`", cells[0]), re.findall(r"`([^`]+)`", cells[1])
        assert len(packages) == 1 and modules, f"a row names one package and its modules: {row}"
        named |= {(packages[0], module) for module in modules}
    return named


def test_every_module_of_lib_is_in_the_architecture_table():
    missing = sorted(f"{package}.{module}" for package, module in _tree() - _table())
    assert not missing, f"docs/architecture.md lacks a row for {missing}"


def test_every_module_in_the_architecture_table_exists():
    gone = sorted(f"{package}.{module}" for package, module in _table() - _tree())
    assert not gone, f"docs/architecture.md names modules that lib/ does not have: {gone}"


# --- the shape of lib/: no import cycle; the grader's: no class too long to read, no code sent to a kernel as text ---

GRADER = LIB / "lmpolicy_grader"


def _modules(folder=LIB) -> dict[str, "ast.Module"]:
    """Every module under ``folder`` by dotted name (a package by its own name), parsed."""
    import ast
    found = {}
    for path in folder.rglob("*.py"):
        if "__pycache__" not in path.parts:
            name = ".".join(path.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
            found[name] = ast.parse(path.read_text(), str(path))
    return found


def _grader_modules() -> dict[str, "ast.Module"]:
    return _modules(GRADER)


def _imports_at_module_level(name: str, tree, modules, anywhere: bool = False) -> set[str]:
    """The modules of ``modules`` that ``name`` imports when it is imported (``anywhere``: inside functions too)."""
    import ast
    found = set()
    for node in (ast.walk(tree) if anywhere else tree.body):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {module for module in found if module in modules and module != name}


def _cycle(modules, anywhere: bool = False, optional: frozenset = frozenset()) -> list[str] | None:
    """An import cycle among ``modules`` (module-level imports; ``anywhere``: inside functions too, but the
    ``optional`` (importer, imported) pairs), as the path that closes it; None if there is none."""
    graph = {name: {target for target in _imports_at_module_level(name, tree, modules, anywhere)
                    if (name, target) not in optional}
             for name, tree in modules.items()}
    state: dict[str, str] = {}

    def visit(name, path):
        state[name] = "open"
        for target in sorted(graph[name]):
            # a package imports its own submodules to re-export them: not a cycle through its parent
            if target.startswith(name + "."):
                continue
            if state.get(target) == "open":
                return [*path, target]
            if target not in state:
                found = visit(target, [*path, target])
                if found:
                    return found
        state[name] = "done"
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name, [name])
            if found:
                return found
    return None


def test_lib_has_no_import_cycle():
    """Neither the student's library nor the grader: each module imports on its own, in one order."""
    cycle = _cycle(_modules())
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


# An import inside a function that points back on purpose: the per-student answer key is absent from every grading
# kernel, and ``variants`` hands its names on when asked (PEP 562), so that only there the import says it is missing.
OPTIONAL_IMPORTS = frozenset({("lmpolicy.per_student.variants", "lmpolicy.per_student.variant_answers")})


def test_no_import_inside_a_function_closes_a_cycle_either():
    """A module that imports another only when a function runs still depends on it: the notebook runtime's
    checks and progress, the demos' base and the demos, each depend one way."""
    cycle = _cycle(_modules(), anywhere=True, optional=OPTIONAL_IMPORTS)
    assert cycle is None, f"import cycle through an import inside a function: {' -> '.join(cycle)}"


def test_the_cycle_finder_finds_a_cycle():
    import ast
    modules = {"a": ast.parse("from b import x"), "b": ast.parse("import c"), "c": ast.parse("import a")}
    assert _cycle(modules) == ["a", "b", "c", "a"]
    lazy = {**modules, "c": ast.parse("def f():\n    import a")}
    assert _cycle(lazy) is None  # inside a function: not when imported
    assert _cycle(lazy, anywhere=True) == ["a", "b", "c", "a"]
    assert _cycle(lazy, anywhere=True, optional=frozenset({("c", "a")})) is None


def _private_uses_of_lmpolicy(name: str, tree) -> list[str]:
    """Where ``tree`` reaches a private name of ``lmpolicy``: ``from lmpolicy.x import _y``, or ``m._y`` on a name
    bound to an lmpolicy module (``from lmpolicy.notebook import checks``, ``import lmpolicy.x as m``)."""
    import ast
    bound, found = set(), []

    def private(attribute: str) -> bool:
        return attribute.startswith("_") and not (attribute.startswith("__") and attribute.endswith("__"))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "lmpolicy":
            for alias in node.names:
                if private(alias.name):
                    found.append(f"{name}:{node.lineno}: from {node.module} import {alias.name}")
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "lmpolicy":
                    bound.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_grader_uses_only_public_names_of_the_students_library():
    """What the grader needs of ``lmpolicy`` is its public surface: a private name may change under it."""
    found = [use for name, tree in _grader_modules().items() for use in _private_uses_of_lmpolicy(name, tree)]
    assert not found, found


def test_a_private_use_of_the_students_library_is_found():
    import ast
    source = ("from lmpolicy.notebook import checks\nfrom lmpolicy.notebook.checks import _fail\n"
              "import lmpolicy.notebook.progress as p\nchecks._is_students('x')\np._nbgrader({})\nchecks.__file__\n"
              "other._private\n")
    assert [use.split(": ", 1)[1] for use in _private_uses_of_lmpolicy("m", ast.parse(source))] == [
        "from lmpolicy.notebook.checks import _fail", "checks._is_students", "p._nbgrader"]


def test_no_class_of_the_grader_is_over_200_lines():
    import ast
    long = [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
            for name, tree in _grader_modules().items() for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 200]
    assert not long, long


def test_the_grader_sends_no_code_to_a_kernel_as_text():
    """Kernels are called by name with data (kernels.remote_call); only a notebook's own cells are code."""
    import ast
    offenders = []
    for name, tree in _grader_modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "user_expressions":
                offenders.append(f"{name}: user_expressions")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("execute", "execute_interactive") \
                    and node.args and not isinstance(node.args[0], ast.Constant) \
                    and not (isinstance(node.args[0], ast.Attribute) and node.args[0].attr == "source") \
                    and not (isinstance(node.args[0], ast.Call) and getattr(node.args[0].func, "id", "") == "text"):  # SQL
                offenders.append(f"{name}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not offenders, offenders


def test_loading_the_course_config_imports_no_torch():
    """nbgrader_config.py imports the preprocessors in every process that reads it (the student's Validate, formgrader,
    each grading worker): the trusted side's torch and numpy load only in the kernels that use them."""
    import subprocess
    import sys
    program = "import sys, lmpolicy_grader.nbgrader_plugins\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
