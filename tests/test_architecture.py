"""docs/architecture.md's module table and the tree of lib/ name the same modules."""
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


# --- the grader's shape: no import cycle, no class too long to read, no code sent to a kernel as text ----------

GRADER = LIB / "lmpolicy_grader"


def _grader_modules() -> dict[str, "ast.Module"]:
    import ast
    found = {}
    for path in GRADER.rglob("*.py"):
        if "__pycache__" not in path.parts:
            name = ".".join(path.relative_to(LIB).with_suffix("").parts).removesuffix(".__init__")
            found[name] = ast.parse(path.read_text(), str(path))
    return found


def _imports_at_module_level(name: str, tree, modules) -> set[str]:
    """The grader modules ``name`` imports when it is imported (not those imported inside functions)."""
    import ast
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {module for module in found if module in modules and module != name}


def test_the_grader_has_no_import_cycle():
    modules = _grader_modules()
    graph = {name: _imports_at_module_level(name, tree, modules) for name, tree in modules.items()}
    state: dict[str, str] = {}

    def visit(name, path):
        state[name] = "open"
        for target in sorted(graph[name]):
            # a package imports its own submodules to re-export them: not a cycle through its parent
            if target.startswith(name + "."):
                continue
            assert state.get(target) != "open", f"import cycle: {' -> '.join([*path, target])}"
            if target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


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
