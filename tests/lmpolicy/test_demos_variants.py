"""The demos follow the student's variant: their own scenario beside the chapter's, the chapter's by default."""
from __future__ import annotations

import numpy as np
import pytest

from lmpolicy.per_student import variants
from lmpolicy.demos.kl_estimators import KLEstimatorDemo
from lmpolicy.demos.tilting import TiltingDemo, available_scenarios
from lmpolicy.exact.scenarios import SCENARIOS


@pytest.fixture
def alice(monkeypatch):
    for name in (variants.HUB_USER_VARIABLE, variants.VARIANTS_OFF_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variants.STUDENT_ID_VARIABLE, "alice")
    return "alice"


@pytest.fixture
def nobody(monkeypatch):
    for name in (variants.STUDENT_ID_VARIABLE, variants.HUB_USER_VARIABLE, variants.VARIANTS_OFF_VARIABLE):
        monkeypatch.delenv(name, raising=False)


def test_without_an_id_the_tilting_menu_is_the_chapters_and_a_students_scenario_is_refused(nobody):
    assert list(available_scenarios()) == list(SCENARIOS)
    with pytest.raises(ValueError, match="needs a student id"):
        TiltingDemo(scenario=variants.YOUR_WORKED)
    assert TiltingDemo().scenario.name == "worked"


def test_with_an_id_the_tilting_menu_adds_the_students_two_models_after_the_chapters(alice):
    names = list(available_scenarios())
    assert names[:len(SCENARIOS)] == list(SCENARIOS) and names[len(SCENARIOS):] == [variants.YOUR_WORKED,
                                                                                      variants.YOUR_BLIND_SPOT]
    demo = TiltingDemo()
    assert demo.scenario.name == "worked"  # the chapter's scenario stays the default
    options = [value for _, value in demo.widget.children[1].children[0].children[0].options]
    assert options == names
    demo.scenario_dropdown.value = variants.YOUR_WORKED
    demo.beta_slider.value = 0.5
    expected = variants.answers("ex11_9a")
    shown = {"demo_V_a": demo.token_view()["a"]["soft_value"], "demo_V_b": demo.token_view()["b"]["soft_value"],
             "demo_beta_log_Z": demo.readouts()["beta_log_partition"],
             "demo_pi_star_bb": demo.response_view()["bb"]["pi_star"]}
    assert all(expected[name].accepts(value) for name, value in shown.items()), shown
    assert not any(variants.answers("ex11_9a", None)[name].accepts(value) for name, value in shown.items())


def test_the_students_blind_spot_in_the_demo_reads_the_answers_of_11_9c(alice):
    near_0_1 = TiltingDemo(scenario=variants.YOUR_BLIND_SPOT, beta=2 ** -3.3).readouts()
    expected = variants.answers("ex11_9c")
    assert expected["proxy_at_beta_0_1"].accepts(near_0_1["expected_reward"])
    assert expected["true_at_beta_0_1"].accepts(near_0_1["true_expected_reward"])


def test_the_kl_demo_offers_the_students_reference_only_with_an_id(alice, monkeypatch):
    yours = variants.for_exercise("ex11_9d")
    demo = KLEstimatorDemo(x=yours.x, reference="yours")
    assert np.allclose(demo.ref_probs, yours.ref_probs)
    assert variants.answers("ex11_9d")["true_kl"].accepts(demo.readouts()["exact_kl"])
    demo.draw(3000)
    assert variants.answers("ex11_9d")["fraction_k3_below_kl"].accepts(demo.readouts()["k3_below_kl_share"])
    assert demo.widget is not None and demo.reference_selector is not None
    demo.reference_selector.value = "chapter"
    assert demo.batches == 0 and "reference changed" in demo.status()
    monkeypatch.delenv(variants.STUDENT_ID_VARIABLE)
    plain = KLEstimatorDemo()
    assert plain.widget is not None and plain.reference_selector is None
    with pytest.raises(ValueError, match="needs a student id"):
        KLEstimatorDemo(reference="yours")
