"""docs/architecture.md's walk of one submission, followed in the code: every stop it names exists, and each is
reached from the stop before it (or the one named) by a name that stop's source holds, so a rename or a reroute
that the walk does not follow fails here."""
from __future__ import annotations

import ast
import importlib
import inspect
import re

from .conftest import ROOT

SECTION = "## One submission, from `grade` to its test cell's grade"
CONFIG_STOP = "nbgrader_config.py: c.Autograde.autograde_preprocessors"

# (stop, what the stop it is reached from holds, which stop that is when not the one before). A stop is a
# function or method, by its dotted name under lmpolicy_grader (or a library's), or the course config's pipeline.
WALK = [
    ("__main__.Grade.run", None, None),
    ("__main__._grade_and_report", "_grade_and_report(", None),
    ("class_grading.grading.grade_class", "grade_class(", None),
    ("class_grading.grading.grade_on_cluster", "grade_on_cluster(", None),
    ("class_grading.grading._grade_units", "_grade_units(", None),
    ("class_grading.grading.grade_task", "client.submit(grade_task", None),
    ("class_grading.grading.grade_unit", "grade_unit(", None),
    (CONFIG_STOP, "Autograde(", None),
    ("nbgrader_plugins.grading_execute.GradingExecute.preprocess", "GradingExecute", None),
    ("nbgrader_plugins.grading_execute.GradingExecute._preprocess_in_a_kernel_that_starts",
     "self._preprocess_in_a_kernel_that_starts(", None),
    ("nbconvert.preprocessors.ExecutePreprocessor.preprocess", "super().preprocess(", None),
    ("nbgrader_plugins.grading_execute.GradingExecute.preprocess_cell", "self.preprocess_cell(", None),
    ("trusted_tests.runner.TrustedTestRunner.run_test", ".run_test(", None),
    ("trusted_tests.in_kernel.bind", '"bind"', None),
    ("trusted_tests.channel.Channel.namespace", "_CHANNEL.namespace(", None),
    ("trusted_tests.proxies.SubmissionFunction.__call__", "SubmissionFunction(", None),
    ("trusted_tests.channel.Channel.call", "self._channel.call(", None),
    ("trusted_tests.call_server.CallServer._op_call", '"op": "call"', None),
    ("nbgrader_plugins.save_auto_grades_whole.SaveAutoGradesWhole.preprocess", "SaveAutoGradesWhole", CONFIG_STOP),
    ("nbconvert.preprocessors.Preprocessor.preprocess", "NbGraderPreprocessor.preprocess(", None),
    ("nbgrader.preprocessors.SaveAutoGrades.preprocess_cell", "self.preprocess_cell(", None),
    ("nbgrader.preprocessors.SaveAutoGrades._add_score", "self._add_score(", None),
    ("nbgrader.utils.determine_grade", "utils.determine_grade(", None),
]


def _resolve(name: str):
    """The function a stop names: the longest importable module prefix (under lmpolicy_grader first), then
    attributes."""
    for dotted in (f"lmpolicy_grader.{name}", name):
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attribute in parts[cut:]:
                    found = getattr(found, attribute)
            except AttributeError:
                break
            return found
    raise AssertionError(f"the walk's stop {name} is not in the code")


def _source(name: str) -> str:
    if name == CONFIG_STOP:  # the statement that declares the autograding pipeline
        tree = ast.parse((ROOT / "nbgrader_config.py").read_text())
        found = [node for node in tree.body if isinstance(node, ast.Assign)
                 and ast.unparse(node.targets[0]) == "c.Autograde.autograde_preprocessors"]
        assert len(found) == 1, "nbgrader_config.py declares c.Autograde.autograde_preprocessors once"
        return ast.unparse(found[0])
    return inspect.getsource(_resolve(name))


def _documented_stops() -> list[str]:
    """The stops the doc's walk names, in order: its numbered lines' first column (a continuation line is indented)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert SECTION in text, f"docs/architecture.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    numbered = re.findall(r"^ ?(\d+)  (\S.*?)(?:\s{2,}|$)", block, re.MULTILINE)
    assert [int(number) for number, _ in numbered] == list(range(1, len(numbered) + 1)), "stops numbered 1, 2, ..."
    return [stop for _, stop in numbered]


def test_the_documented_walk_is_the_one_this_test_follows():
    assert _documented_stops() == [stop for stop, _, _ in WALK]


def test_every_stop_of_the_walk_exists_and_is_reached_from_the_one_before():
    sources = {stop: _source(stop) for stop, _, _ in WALK}
    previous = None
    for stop, reached_by, reached_from in WALK:
        origin = reached_from or previous
        if origin is not None:
            assert reached_by in sources[origin], f"{origin} no longer reaches {stop} (by {reached_by!r})"
        previous = stop
