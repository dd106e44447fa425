"""`make test` hands its workers the longest work first (tests/longest_first.py)."""
from types import SimpleNamespace

from tests.longest_first import MEASURED_SECONDS, put_longest_first, work_unit


def test_a_group_is_one_unit_and_a_parametrized_test_outside_any_group_its_own():
    assert work_unit("tests/a.py::test_x@hub") == "hub"
    assert work_unit("tests/a.py::test_x[a@b]") == "tests/a.py::test_x[a@b]"
    assert work_unit("tests/a.py::test_x[a@b]@hub") == "hub"


def test_the_measured_units_go_first_longest_first_and_the_rest_keep_their_order():
    nodeids = ["tests/a.py::test_quick", "tests/b.py::test_one@hub", "tests/c.py::test_quick_too",
               "tests/d.py::test_two@notebook08_as_a_student", "tests/b.py::test_two@hub"]
    items = [SimpleNamespace(nodeid=n) for n in nodeids]
    put_longest_first(items)
    assert MEASURED_SECONDS["notebook08_as_a_student"] > MEASURED_SECONDS["hub"]
    assert [i.nodeid for i in items] == ["tests/d.py::test_two@notebook08_as_a_student", "tests/b.py::test_one@hub",
                                         "tests/b.py::test_two@hub", "tests/a.py::test_quick",
                                         "tests/c.py::test_quick_too"]


def test_every_measured_group_is_a_group_of_the_suite(repo_root):
    groups = {unit for unit in MEASURED_SECONDS if "::" not in unit}
    sources = "\n".join(path.read_text() for path in (repo_root / "tests").rglob("*.py")
                        if "longest_first" not in path.name)
    for group in groups:
        assert f'xdist_group("{group}")' in sources or f'"{group}"' in sources, f"no test is in the group {group!r}"
    for test in MEASURED_SECONDS.keys() - groups:
        module, name = test.split("::")
        assert f"def {name.split('[')[0]}(" in (repo_root / module).read_text(), f"no test {test}"
