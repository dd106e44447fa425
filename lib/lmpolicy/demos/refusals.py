"""Every refusal a demo can give under the grader, as its error output: the grader keeps such an output in the
feedback, since one that matches carries nothing the submission recorded (``lmpolicy_grader.nbgrader_plugins.
outputs_as_handed_in``).

It names both demos, so it sits above them: the demos' shared base never imports a demo.
"""
from __future__ import annotations

import functools

from lmpolicy.demos import kl_estimators, tilting
from lmpolicy.demos.base import DemoNotAvailableWhileGrading, WidgetDemo, refusal_text

DEMOS = (tilting.TiltingDemo, kl_estimators.KLEstimatorDemo)


@functools.cache
def every_member_refusal() -> frozenset[tuple[str, ...]]:
    """The error output (its traceback lines) of every refusal a guarded member of the course's demos can give:
    a finite set, one per demo and member, so output that matches one carries nothing else. (A public
    attribute a stand-in never set is refused too, under any name, so those refusals are not in the set.)"""
    refusals = set()
    for demo in DEMOS:
        for cls in (demo, WidgetDemo):  # the demo's own members, and ``widget``
            for name, member in vars(cls).items():
                function = member.fget if isinstance(member, property) else member
                if not name.startswith("_") and hasattr(function, "__wrapped__"):  # guarded by WidgetDemo
                    used = name if isinstance(member, property) else f"{name}()"
                    error = DemoNotAvailableWhileGrading(*refusal_text(demo.__name__, used))
                    refusals.add(tuple(error._render_traceback_()))
    return frozenset(refusals)
