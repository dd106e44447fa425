"""Under nbgrader (validate or grading) a demo hands out no numbers: an answer cell that takes them from
a demo fails at once, with a message saying what happened and what to do, instead of passing Validate and
scoring 0 in the grading sandbox, where the demos' solvers are not there."""
import re

import pytest

from lmpolicy.notebook.checks import CheckFailed
from lmpolicy.demos.base import GRADER_NOTE, DemoNotAvailableWhileGrading, WidgetDemo
from lmpolicy.demos.kl_estimators import KLEstimatorDemo
from lmpolicy.demos.tilting import TiltingDemo

DEMOS = {"TiltingDemo": (TiltingDemo, {"scenario": "worked", "beta": 0.5}),
         "KLEstimatorDemo": (KLEstimatorDemo, {"x": -1.0, "tokens_per_estimate": 16})}
# What a demo computes and hands out, as a student's answer cell would ask for it
TAKEN = {
    "TiltingDemo": {
        "readouts()": lambda d: d.readouts()["beta_log_partition"],
        "token_view()": lambda d: d.token_view()["a"]["soft_value"],
        "response_view()": lambda d: d.response_view()["bb"]["pi_star"],
        "optimum": lambda d: d.optimum.probs,
        "frontier": lambda d: d.frontier.kl,
        "set()": lambda d: d.set(beta=1.0),
        "widget": lambda d: d.widget,
    },
    "KLEstimatorDemo": {
        "draw()": lambda d: d.draw(100),
        "readouts()": lambda d: d.readouts()["exact_kl"],
        "moments": lambda d: d.moments.kl,
        "batch_estimates": lambda d: d.batch_estimates["k3"],
        "histogram_counts()": lambda d: d.histogram_counts(),
        "ref_probs": lambda d: d.ref_probs,
        "widget": lambda d: d.widget,
    },
}
CASES = [(demo, used) for demo, uses in TAKEN.items() for used in uses]


@pytest.mark.parametrize("execution", ["validate", "autograde"])
@pytest.mark.parametrize("demo,used", CASES, ids=[f"{d}.{u}" for d, u in CASES])
def test_under_nbgrader_every_way_to_take_a_number_raises_the_demo_message(monkeypatch, execution, demo, used):
    monkeypatch.setenv("NBGRADER_EXECUTION", execution)
    cls, kwargs = DEMOS[demo]
    stand_in = cls(**kwargs)
    with pytest.raises(DemoNotAvailableWhileGrading) as raised:
        TAKEN[demo][used](stand_in)
    error = raised.value
    assert isinstance(error, CheckFailed)  # shown as a short ✗ message, as the checks' own failures are
    assert error.problem.startswith(f"your answer used {demo}.{used}\n")
    assert "The demo is not there while your notebook is graded, so that answer scores 0." in error.problem
    assert "type them in" in error.hint


@pytest.mark.parametrize("demo", DEMOS)
def test_every_public_member_but_show_refuses_under_the_grader(monkeypatch, demo):
    # a member added to a demo later is covered too: only show() hands out nothing
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    cls, kwargs = DEMOS[demo]
    stand_in = cls(**kwargs)
    public = sorted(name for name in dir(cls) if not name.startswith("_"))
    assert "readouts" in public and "widget" in public
    for name in public:
        if name == "show":
            continue
        with pytest.raises(DemoNotAvailableWhileGrading, match=re.escape(f"{cls.__name__}.{name}")):
            member = getattr(stand_in, name)
            member() if callable(member) else None


@pytest.mark.parametrize("demo", DEMOS)
def test_under_the_grader_show_still_prints_its_note(monkeypatch, capsys, demo):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    cls, kwargs = DEMOS[demo]
    cls(**kwargs).show()
    assert capsys.readouterr().out.strip() == GRADER_NOTE


def test_the_message_is_a_few_short_lines_a_student_can_act_on(monkeypatch):
    # nbgrader validate shows each line of a failed cell's error indented by 4 and cut at 87 characters
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    with pytest.raises(DemoNotAvailableWhileGrading) as raised:
        KLEstimatorDemo().histogram_counts()
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(raised.value._render_traceback_())).splitlines()
    assert shown == [
        "✗ Not there while grading: your answer used KLEstimatorDemo.histogram_counts()",
        "The demo is not there while your notebook is graded, so that answer scores 0.",
        "Hint: read the numbers off the demo in JupyterLab and type them in",
        "(or compute them with your own functions).",
    ]
    assert max(len(line) for line in shown) <= 87 - 4


def test_the_check_cell_after_a_refused_answer_cell_says_the_same_and_no_other(monkeypatch):
    # nbgrader validate shows only the check cells' errors: the check right after the refused answer repeats it
    from IPython.testing.globalipapp import get_ipython

    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    shell = get_ipython()
    shell.run_cell("from lmpolicy.demos.tilting import TiltingDemo\n"
                   "from lmpolicy.demos.base import check_answer_not_from_demo", store_history=True)
    answer = shell.run_cell("demo_V_a = TiltingDemo(beta=0.5).token_view()['a']['soft_value']", store_history=True)
    assert isinstance(answer.error_in_exec, DemoNotAvailableWhileGrading)
    check = shell.run_cell("check_answer_not_from_demo()", store_history=True)
    assert check.error_in_exec is answer.error_in_exec
    shell.run_cell("demo_V_b = 1.663", store_history=True)  # the next answer, typed in
    assert shell.run_cell("check_answer_not_from_demo()", store_history=True).error_in_exec is None


@pytest.mark.parametrize("demo", DEMOS)
def test_outside_the_grader_the_demo_hands_out_its_numbers(monkeypatch, demo):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    cls, kwargs = DEMOS[demo]
    shown = cls(**kwargs)
    for used, take in TAKEN[demo].items():
        if used != "widget":
            take(shown)
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        shown.no_such_thing


def test_a_missing_private_attribute_stays_an_attribute_error_under_the_grader(monkeypatch):
    # IPython's display looks for _repr_html_ and the like with getattr(..., None): that must keep working
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert getattr(TiltingDemo(), "_repr_html_", None) is None
    assert issubclass(TiltingDemo, WidgetDemo)


def test_the_refusals_the_grader_keeps_are_every_guarded_member_of_every_demo(monkeypatch):
    """``lmpolicy.demos.refusals`` names every demo of the package, and its set holds each demo's refusals."""
    import importlib
    import pkgutil

    import lmpolicy.demos
    from lmpolicy.demos import refusals

    for module in pkgutil.iter_modules(lmpolicy.demos.__path__):
        importlib.import_module(f"lmpolicy.demos.{module.name}")
    assert set(WidgetDemo.__subclasses__()) == set(refusals.DEMOS)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    for demo, (cls, kwargs) in DEMOS.items():
        for used, take in TAKEN[demo].items():
            if not hasattr(cls, used.removesuffix("()")):
                continue  # state a stand-in never computed: refused under any name, so not in the set
            with pytest.raises(DemoNotAvailableWhileGrading) as raised:
                take(cls(**kwargs))
            assert tuple(raised.value._render_traceback_()) in refusals.every_member_refusal(), (demo, used)
