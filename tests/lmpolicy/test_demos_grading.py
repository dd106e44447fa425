"""Under nbgrader (validate or grading) a demo hands out no numbers: an answer cell that takes them from
a demo fails at once, with a message saying what happened and what to do, instead of passing Validate and
scoring 0 in the grading sandbox, where the demos' solvers are not there."""
import re

import pytest

from lmpolicy.checks import CheckFailed
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
    assert f"asks {demo} for numbers ({used})" in error.problem
    assert "while your notebook is graded the demo is not there" in error.problem
    assert "type them into your answer cell" in error.hint


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
        with pytest.raises(DemoNotAvailableWhileGrading, match=re.escape(f"({name}")):
            member = getattr(stand_in, name)
            member() if callable(member) else None


@pytest.mark.parametrize("demo", DEMOS)
def test_under_the_grader_show_still_prints_its_note(monkeypatch, capsys, demo):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    cls, kwargs = DEMOS[demo]
    cls(**kwargs).show()
    assert capsys.readouterr().out.strip() == GRADER_NOTE


def test_the_message_is_a_few_lines_a_student_can_act_on(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    with pytest.raises(DemoNotAvailableWhileGrading) as raised:
        TiltingDemo().readouts()
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(raised.value._render_traceback_()))
    assert shown.splitlines()[0].startswith("✗ The demo is not there while grading: this cell asks TiltingDemo")
    assert "Hint: read the numbers off the demo in JupyterLab and type them into your answer cell" in shown
    assert len(shown.splitlines()) <= 4


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
