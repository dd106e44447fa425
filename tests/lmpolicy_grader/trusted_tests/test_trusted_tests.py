"""The tests' own process: the channel's safe form, calls into a real grading kernel, and grading.

- ``channel``: every kind of value survives a round trip; what is outside the safe form is refused
  by name; a forged header cannot make decoding build anything else.
- ``trusted_tests.channel.Channel`` against a real kernel with ``call_server`` loaded: results, a call
  that changes its inputs refused, a generator that advanced, a gradient through the submission's function,
  the submission's exceptions in its own words, and the no-credit rule.
- a reference notebook graded with its tests in the trusted process earns every point, and every
  example submission scores exactly what it scores with the tests in the grading kernel.
"""
from __future__ import annotations

import math
import shutil
import textwrap
from collections import defaultdict

import nbformat
import numpy as np
import pytest
import torch
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbgrader.api import Gradebook

from lmpolicy.notebook import checks
from lmpolicy_grader.trusted_tests import codec as channel, no_credit, proxies
from lmpolicy_grader.trusted_tests.channel import Channel
from lmpolicy_grader.trusted_tests.errors import InputChanged
from lmpolicy_grader.kernels.grading_kernel import KERNEL_NAME, install_grading_kernel
from lmpolicy_grader.class_grading.status import Status
from tests.verdicts import one_line

# --- the safe form -------------------------------------------------------------------------------------


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and a.requires_grad == b.requires_grad and torch.equal(a.detach(), b.detach()))
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and np.array_equal(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b and repr(a) == repr(b)  # repr: -0.0 is not 0.0


ROUND_TRIPS = {
    "atoms": [None, True, False, 0, -7, 2**100, "π ≠ 3"],
    "floats": [0.0, -0.0, 1.5, float("inf"), float("-inf"), 1e-320],
    "nan": float("nan"),
    "containers": {"a": [1, (2.0, "three")], 4: {"nested": ()}, None: [], 2.5: True},
    "arrays": [np.arange(12, dtype=np.int64).reshape(3, 4), np.array([[1.5, -np.inf]], dtype=np.float32),
               np.array(3.25), np.zeros((0, 5)), np.array([True, False]), np.array([1 + 2j], dtype=np.complex64),
               np.asfortranarray(np.arange(6.0).reshape(2, 3))],
    "numpy scalars": [np.float64(2.5), np.int32(-3), np.bool_(True)],
    "tensors": [torch.tensor([1.0, -math.inf, 0.5], dtype=torch.float64), torch.arange(6).reshape(2, 3),
                torch.tensor(3.0), torch.zeros(0, 2), torch.tensor([True, False]),
                torch.tensor([1.5, 2.5], dtype=torch.bfloat16), torch.tensor([0.1], dtype=torch.float16),
                torch.arange(12.0).reshape(3, 4).t(), torch.tensor([2.0, 3.0]).requires_grad_()],
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_values_survive_a_round_trip(name):
    value = ROUND_TRIPS[name]
    header, buffers = channel.encode(value)
    assert _same(value, channel.decode(header, buffers))


def test_a_generator_state_survives_and_draws_the_same_numbers():
    generator = torch.Generator().manual_seed(1234)
    torch.rand(5, generator=generator)
    copy = channel.decode(*channel.encode(generator))
    assert torch.equal(torch.rand(8, generator=copy), torch.rand(8, generator=generator))


class _Sneaky:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value,named", [
    (_Sneaky(), "_Sneaky"), ([1, {"x": lambda: 0}], "function"), (np.array([object()], dtype=object), "dtype object"),
    ({(1, 2): 3}, "key of type tuple"), (torch.nn.Linear(2, 2), "Linear"), (b"bytes", "bytes"),
])
def test_values_outside_the_safe_form_are_refused_by_name(value, named):
    with pytest.raises(channel.NotEncodable, match=named):
        channel.encode(value)


def _tensor_header(**changes):
    header, buffers = channel.encode(torch.arange(4, dtype=torch.float32))
    return {**header, **changes}, buffers


@pytest.mark.parametrize("header,buffers,complaint", [
    (*_tensor_header(shape=[5]), "needs 20 bytes"),
    (*_tensor_header(shape=[-4]), "non-negative"),
    (*_tensor_header(dtype="object"), "dtype"),
    (*_tensor_header(b=3), "buffer index"),
    ({"t": "ndarray", "dtype": "O", "shape": [1], "b": 0}, [b"\0" * 8], "not a numeric dtype"),
    ({"t": "ndarray", "dtype": "<U4", "shape": [1], "b": 0}, [b"\0" * 16], "not a numeric dtype"),
    ({"t": "pickle", "v": "cos\nsystem\n"}, [], "unknown kind"),
    ({"t": "atom", "v": {"t": "int"}}, [], "atom holds a dict"),
    ({"t": "int", "v": "__import__('os')"}, [], "is not a number"),
    ({"t": "generator", "b": 0}, [b"\1\2\3"], "generator state"),
    ({"t": "list", "v": [{"t": "list", "v": []}] * 3}, [], None),
])
def test_a_forged_header_cannot_build_anything_else(header, buffers, complaint):
    if complaint is None:  # a well-formed one for contrast
        assert channel.decode(header, buffers) == [[], [], []]
        return
    with pytest.raises(channel.NotDecodable, match=complaint):
        channel.decode(header, buffers)


def test_nesting_past_the_limit_is_refused_both_ways():
    deep = []
    for _ in range(channel.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(channel.NotEncodable, match="nested"):
        channel.encode(deep)
    header = {"t": "list", "v": []}
    for _ in range(channel.MAX_DEPTH + 2):
        header = {"t": "list", "v": [header]}
    with pytest.raises(channel.NotDecodable, match="nested"):
        channel.decode(header, [])


# --- the no-credit rule on the submission's source ------------------------------------------------------

SHORTCUTS = {
    "calls it": ("def softmax(x, dim=-1):\n    return torch.softmax(x, dim)", True),
    "a method": ("def softmax(x, dim=-1):\n    return x.softmax(dim)", True),
    "imports it": ("from lmpolicy.exact.temperature import softmax", True),
    "an alias": ("softmax = F.softmax", True),
    "through a helper": ("_h = F.softmax\n", True, "def softmax(x, dim=-1):\n    return _h(x, dim)"),
    "a copied code object": ("def softmax(x, dim=-1):\n    pass\nsoftmax.__code__ = F.softmax.__code__", True),
    "by a string": ("def softmax(x, dim=-1):\n    return getattr(torch, 'softmax')(x, dim)", True),
    "magics in the cell": ("%time 1\nsoftmax = torch.softmax", True),
    "honest": ("def softmax(x, dim=-1):\n    e = torch.exp(x - x.max(dim, keepdim=True).values)\n"
               "    return e / e.sum(dim, keepdim=True)", False),
    "honest, beside a demo that uses the library": ("def softmax(x, dim=-1):\n    return torch.exp(x) / torch.exp(x).sum()",
                                                    False, "check = torch.softmax(z, -1)\nprint(softmax(z))"),
    "honest, after trying the library in a scratch cell": ("softmax = torch.softmax", False,
                                                           "def softmax(x, dim=-1):\n    return torch.exp(x) / torch.exp(x).sum()"),
    "the library, after an honest try": ("def softmax(x, dim=-1):\n    return torch.exp(x)", True,
                                         "softmax = torch.softmax"),
    "beside an import of the module named like the function": ("from lmpolicy.exact import kl, scenarios", False,
                                                               "def kl_chain_rule(p, q):\n    return scenarios.x(p)"),
    "the function imported beside a module": ("from lmpolicy.exact.kl import kl, chain_rule_kl", True,
                                              "def kl_chain_rule(p, q):\n    return kl(p, q)"),
    "the library, if a flag is set": ("def softmax(x, dim=-1):\n    return torch.exp(x)", True,
                                      "if FAST:\n    softmax = F.softmax"),
    # what no literal name gives away (issue 20): caught as a way the rule cannot follow
    "a computed name taken early": ("_sm = getattr(torch, 'soft' + 'max')", True,
                                    "def softmax(x, dim=-1):\n    return _sm(x, dim)"),
    "a wrapped copy of a code object": ("import types\nfrom lmpolicy.exact import temperature as T\n"
                                        "_f = types.FunctionType(T.log_softmax.__code__, T.__dict__)", True,
                                        "def softmax(x, dim=-1):\n    return _f(x)"),
    "exec of the module's source": ("import inspect\nfrom lmpolicy.exact import temperature as T\n_ns = {}\n"
                                    "exec(inspect.getsource(T), _ns)", True,
                                    "def softmax(x, dim=-1):\n    return _ns['soft' + 'max'](x)"),
    "exec of the module's file": ("from lmpolicy.exact import temperature as T\n_ns = {}\nexec(open(T.__file__).read(), _ns)",
                                  True, "def softmax(x, dim=-1):\n    return _ns[chr(115) + 'oftmax'](x)"),
    "an earlier cell's output": ("torch.softmax", True, "def softmax(x, dim=-1):\n    return Out[1](x, dim)"),
    "the same under another name": ("def softmax(x, dim=-1):\n    return F.softmin(-x, dim)", True),
    "a softmax module": ("def softmax(x, dim=-1):\n    return torch.nn.Softmax(dim)(x)", True),
    "a module of its own folder": ("import my_softmaxes\ndef softmax(x, dim=-1):\n    return my_softmaxes.f(x)", True),
    "honest, with math and numpy": ("import math\nimport numpy as np\ndef softmax(x, dim=-1):\n"
                                    "    e = np.exp(x - np.max(x))\n    return e / math.fsum(e)", False),
}


@pytest.mark.parametrize("case", sorted(SHORTCUTS))
def test_the_no_credit_rule_reads_the_submissions_source(case):
    source, caught, *more = SHORTCUTS[case]
    import lmpolicy.exact.kl  # noqa: F401  (the trusted kernel has it from the set-up cell)
    name, blocked = ("kl_chain_rule", {"kl", "chain_rule_kl"}) if "kl_chain_rule" in source + "".join(more) else ("softmax", {"softmax", "log_softmax"})
    reason = no_credit.library_shortcut([source, *more], name, blocked)
    assert (reason is not None) == caught, reason


# --- calls into a real grading kernel -------------------------------------------------------------------

SUBMISSION = textwrap.dedent("""
    import torch
    import torch.nn.functional as F

    def scale(x, factor=2.0):
        return x * factor

    def scale_in_place(x):
        x.mul_(3)
        return None

    def draw(generator):
        return torch.rand(3, generator=generator)

    def switch_on_grad(x):
        x.requires_grad_(True)
        return x.sum()

    def cube(x):
        return (x ** 3, {"twice": 2 * x})

    def broken(x):
        raise ValueError("the student's own bug")

    def named_after_what_it_saw(x):  # a class of its own, named after an input it was called with
        raise type("Seen_" + "_".join(f"{v:.0f}" for v in x.tolist()), (Exception,), {})("recorded: 0.4171")

    def stub(x):
        raise NotImplementedError

    def opaque(x):
        return object()

    def uses_library(x):
        return F.softmax(x, -1)

    def copied(x, dim=None):
        pass
    copied.__code__, copied.__defaults__ = F.softmax.__code__, F.softmax.__defaults__

    def entropy(x):
        return -(x * x.log()).sum()

    def entropy_twice(x):
        return entropy(x) + entropy(x)

    answer = {"k": [1.5, "two"]}
    model = torch.nn.Linear(2, 2)
    big = list(range(10_000))
""")


@pytest.fixture(scope="module")
def submission_channel(tmp_path_factory):
    kernels = tmp_path_factory.mktemp("kernels")
    install_grading_kernel(kernels)  # the grading kernel's command line (limits, call_server), no sandbox
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive(SUBMISSION, timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        info = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in km.get_connection_info().items()}
        connection = Channel(info, deadline_seconds=20)
        assert connection.broken is None, connection.broken
        yield connection
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_namespace_holds_proxies_values_and_unreadables(submission_channel):
    found = submission_channel.namespace(skip={"torch", "F", "scale"}, mentioned={"model", "big"})
    assert isinstance(found["cube"], proxies.SubmissionFunction) and found["cube"].__name__ == "cube"
    assert "scale" not in found  # a name the tests defined themselves
    assert found["answer"] == {"k": [1.5, "two"]}
    # in the grader's words: the submission's own (its class's name among them) could carry what it recorded
    assert isinstance(found["model"], proxies.Unreadable) and repr(found["model"]) == "<model: outside what the grader can read>"
    assert found["big"] == list(range(10_000))


def test_a_large_value_comes_only_when_the_test_cell_names_it(submission_channel):
    found = submission_channel.namespace(skip=set())
    assert "big" not in found and "model" not in found and found["answer"] == {"k": [1.5, "two"]}


def test_a_call_returns_the_result_in_the_safe_form(submission_channel):
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    got = submission_channel.call("scale", (x,), {"factor": 0.5})
    assert torch.equal(got, x * 0.5) and got.dtype == torch.float64


def test_a_call_that_changes_its_inputs_fails_and_leaves_the_tests_inputs_alone(submission_channel):
    """The test's inputs stay its own (issue 20): a changed value or requires_grad fails the call with the reason."""
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(InputChanged, match=r"scale_in_place changed an input it was given \(args\[0\]\) in place"):
        submission_channel.call("scale_in_place", (x,), {})
    assert torch.equal(x, torch.tensor([1.0, 2.0]))
    y = torch.zeros(2)
    with pytest.raises(InputChanged, match="switch_on_grad changed an input"):
        submission_channel.call("switch_on_grad", (y,), {})
    assert not y.requires_grad


def test_a_generator_comes_back_advanced(submission_channel):
    generator, twin = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    drawn = submission_channel.call("draw", (generator,), {})
    assert torch.equal(drawn, torch.rand(3, generator=twin))
    assert torch.equal(torch.rand(2, generator=generator), torch.rand(2, generator=twin))  # it advanced


def test_a_gradient_flows_back_through_the_submissions_process(submission_channel):
    x = torch.tensor([0.5, -2.0], dtype=torch.float64, requires_grad=True)
    cubed, parts = submission_channel.call("cube", (x,), {})
    assert cubed.requires_grad and parts["twice"].requires_grad
    (cubed.sum() + parts["twice"].sum()).backward()
    assert torch.allclose(x.grad, 3 * x.detach() ** 2 + 2)


def test_the_submissions_exceptions_come_back_by_their_builtin_type_and_nothing_of_their_words(submission_channel):
    """Under the grader the student's function holds the hidden inputs it was called with: its message, its lines and
    the name of a class of its own stay in its process; the verdict names a builtin type and says where to see the rest."""
    with pytest.raises(checks.StudentCodeRaised) as raised:
        checks.call_student(proxies.SubmissionFunction(submission_channel, "broken"), torch.zeros(1))
    assert raised.value.problem == "broken(tensor([0.])) raised ValueError"
    assert raised.value._details() == [checks.WHERE_IT_RAISED]
    with pytest.raises(checks.StudentCodeRaised) as raised:
        checks.call_student(proxies.SubmissionFunction(submission_channel, "named_after_what_it_saw"), torch.tensor([7.0, 3.0]))
    shown = "\n".join(raised.value._render_traceback_())
    assert raised.value.problem == "named_after_what_it_saw(tensor([7., 3.])) raised an exception"
    assert "Seen_" not in shown and "0.4171" not in shown and "recorded" not in shown, shown
    with pytest.raises(checks.StudentCodeRaised, match="not written yet"):
        checks.call_student(proxies.SubmissionFunction(submission_channel, "stub"), torch.zeros(1))
    with pytest.raises(checks.StudentCodeRaised, match="which the grader cannot read"):
        checks.call_student(proxies.SubmissionFunction(submission_channel, "opaque"), torch.zeros(1))


def test_a_blocked_library_function_gets_no_credit_by_the_source_not_the_submissions_word(submission_channel):
    """The submission's process blocks nothing any more (issue 20: a block there is one more thing it can
    undo); the rule reads the notebook's source on the trusted side."""
    x = torch.tensor([1.0, 2.0])
    no_credit.SOURCES[:] = []  # no source to read: nothing stops the call
    with checks.no_library_shortcut(torch.nn.functional.softmax):
        assert torch.allclose(submission_channel.call("uses_library", (x,), {}), torch.softmax(x, -1))
    no_credit.SOURCES[:] = [SUBMISSION]
    try:
        for name, says in [("uses_library", "your uses_library uses the library's softmax"),
                           ("copied", "your copied uses the library's softmax")]:
            with checks.no_library_shortcut(torch.nn.functional.softmax):
                with pytest.raises(checks.LibraryShortcutUsed, match=says):
                    checks.call_student(proxies.SubmissionFunction(submission_channel, name), x)
    finally:
        no_credit.SOURCES[:] = []


def test_call_counting_counts_where_the_function_runs(submission_channel):
    x = torch.tensor([0.25, 0.75], dtype=torch.float64)
    value, calls = checks.call_counting(proxies.SubmissionFunction(submission_channel, "entropy_twice"),
                                        "entropy", x)
    assert calls == 2 and torch.allclose(value, -2 * (x * x.log()).sum())
    namespace = {}  # the same helper in the student's own kernel: the function's globals
    exec(SUBMISSION, namespace)
    value, calls = checks.call_counting(namespace["entropy_twice"], "entropy", x)
    assert calls == 2 and namespace["entropy"].__name__ == "entropy"  # put back after the call


# --- grading ch11 notebooks ---------------------------------------------------------------

GRADED_NOTEBOOKS = ("01_policy_softmax", "03_three_stages")
STUDENTS = ("reference", "blank", "mistakes")


def _course(root, repo_root):
    from lmpolicy_grader.__main__ import release
    from lmpolicy_grader.class_grading.examples_course import place_examples

    (root / "source" / "ch11").mkdir(parents=True)
    for name in GRADED_NOTEBOOKS:
        shutil.copy(repo_root / "source" / "ch11" / f"{name}.ipynb", root / "source" / "ch11")
    config = (repo_root / "nbgrader_config.py").read_text()
    (root / "nbgrader_config.py").write_text(config)
    release(root)
    for student in place_examples(root):
        if student not in STUDENTS:
            shutil.rmtree(root / "submitted" / student)
    return root


def _scores(root) -> dict:
    from lmpolicy_grader.class_grading.course import load_config

    config = load_config(root)
    found = defaultdict(dict)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for student in STUDENTS:
            for name in GRADED_NOTEBOOKS:
                for grade in gradebook.find_submission_notebook(name, "ch11", student).grades:
                    if grade.cell_type == "code":
                        found[student][grade.name] = grade.score
    return dict(found)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, repo_root):
    from lmpolicy_grader.class_grading.grading import grade_class

    root = _course(tmp_path_factory.mktemp("trusted"), repo_root)
    outcomes = grade_class(root, workers=2, log=lambda _: None)
    return root, outcomes, _scores(root)


@pytest.mark.slow
@pytest.mark.xdist_group("trusted_tests_grading")
def test_the_reference_earns_every_point_and_the_blank_none(graded):
    root, outcomes, scores = graded
    assert all(o.status == Status.GRADED for o in outcomes), [(o.student, o.notebook, o.reason) for o in outcomes]
    nb = nbformat.read(root / "autograded" / "reference" / "ch11" / "01_policy_softmax.ipynb", as_version=4)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    assert tests and not any(o.output_type == "error" for c in tests for o in c.outputs)
    from lmpolicy_grader.class_grading.course import load_config
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for name in GRADED_NOTEBOOKS:
            submission = gradebook.find_submission_notebook(name, "ch11", "reference")
            assert submission.code_score == submission.max_code_score > 0, name
    assert not any(scores["blank"].values())
    assert any(score == 0 for score in scores["mistakes"].values())


@pytest.mark.parametrize("answer, says", [
    ("pass  # the function deleted", "your notebook does not define double: its answer cell above this test must"),
    ("raise ValueError('not ready')\n" + "def double(x):\n    return 2 * np.asarray(x, dtype=float)",
     "a cell of your notebook above this test defines double, but it did not exist when the test ran: that cell "
     "raised before it got there"),
], ids=["never defined", "its cell raised first"])
def test_a_test_of_a_function_the_submission_lacks_says_why_in_the_feedback(tmp_path, answer, says):
    """In the trusted kernel the test's NameError names the student's function and what to do about it."""
    from lmpolicy_grader.__main__ import release
    from lmpolicy_grader.class_grading.grading import grade_unit, worker_config

    from .. import tiny_course

    root = tiny_course.make_course(tmp_path / "course")
    release(root)
    tiny_course.submit(root, "student", tiny_course.replace_answer(tiny_course.source_notebook(), "ex1__answer", answer))
    outcome = grade_unit(root, worker_config(str(root), False), "student", tiny_course.NOTEBOOK)
    assert outcome.status == Status.GRADED, outcome.reason
    graded = nbformat.read(root / "autograded" / "student" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)
    (error,) = [o for o in graded.cells[tiny_course.cell_index(graded, "ex1__tests")].outputs if o.output_type == "error"]
    assert error.ename == "NameError"
    verdict = [checks_text(line) for line in error.traceback]
    verdict = verdict[next(i for i, line in enumerate(verdict) if line.startswith("\u2717")):]
    assert one_line(verdict).startswith("\u2717 Not defined yet: " + says), verdict
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        grades = {g.name: g.score for g in gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", "student").grades}
    assert grades["ex1__tests"] == 0 and grades["ex2__tests"] == tiny_course.POINTS["ex2"]


def checks_text(line: str) -> str:
    """``line`` without its ANSI colours."""
    import re
    return re.sub(r"\x1b\[[0-9;]*m", "", line)
