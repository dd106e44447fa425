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
