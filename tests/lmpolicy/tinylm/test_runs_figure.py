"""lmpolicy.tinylm.runs_figure: notebook 08's runs told apart without colour, and said in words from their histories."""
import base64
import io

import matplotlib.pyplot as plt
from PIL import Image

from lmpolicy.tinylm import reinforce
from lmpolicy.tinylm.runs_figure import describe_runs, draw_runs, plot_runs
from tests.lmpolicy.notebook.test_figure import Images
from tinylm_helpers import tiny_recipe, untrained_model


def two_runs():
    """Two real (tiny) runs from one start, measured three times each, that end in different places."""
    recipe = tiny_recipe(max_updates=2, eval_every_updates=1)
    first = reinforce.train(recipe, untrained_model(), progress=False, label="REINFORCE, beta = 0.02").history
    other = reinforce.train(tiny_recipe(max_updates=2, eval_every_updates=1, seed=3, beta=0.0), untrained_model(),
                            progress=False, label="REINFORCE, beta = 0").history
    return recipe, [first, other]


def test_the_words_say_which_marker_is_which_run_and_where_each_run_ends():
    recipe, histories = two_runs()
    words = describe_runs(histories, recipe)
    assert words.startswith("Three panels of 2 fine-tuning runs against the answers seen")
    assert f"greedy {recipe.target_greedy:.2f} and sampled {recipe.target_sampled:.2f}" in words
    h = histories[0]
    assert f"Every run starts at greedy {h.greedy[0]:.3f}, sampled {h.sampled[0]:.3f}, KL {h.kl[0]:.3f} nats." in words
    for h, marker in zip(histories, ("circles", "squares")):
        assert (f"{h.label} ({marker}) ends after {h.answers[-1]:,} answers at greedy {h.greedy[-1]:.3f}, "
                f"sampled {h.sampled[-1]:.3f}, KL {h.kl[-1]:.3f} nats.") in words


def test_the_words_follow_the_run():
    recipe, histories = two_runs()
    moved = histories[1]
    before = describe_runs(histories, recipe)
    moved.kl[-1], moved.sampled[-1] = 0.123, 0.456
    after = describe_runs(histories, recipe)
    assert after != before and "sampled 0.456, KL 0.123 nats." in after


def test_runs_differ_by_marker_not_by_colour_alone_in_every_panel():
    recipe, histories = two_runs()
    fig = draw_runs(histories, recipe)
    for ax in fig.axes:
        markers = {line.get_marker() for line in ax.lines if line.get_marker() not in ("None", "", None)}
        assert markers == {"o", "s"}, (ax.get_title(), markers)
    # the legend shows each run's marker beside its name
    (legend,) = fig.legends
    assert [(t.get_text(), h.get_marker()) for t, h in zip(legend.get_texts(), legend.legend_handles)] == \
        [(histories[0].label, "o"), (histories[1].label, "s")]
    plt.close(fig)


def test_plot_runs_shows_the_picture_with_the_words_as_its_alt(monkeypatch):
    shown = []  # what IPython's display is handed (no IPython shell made, which other tests would then see)
    monkeypatch.setattr("IPython.display.display", lambda *objects, **options: shown.append(objects))
    recipe, histories = two_runs()
    plot_runs(histories, recipe)
    ((bundle,),) = shown
    (image,) = Images(bundle["text/html"]).images
    assert image["alt"] == describe_runs(histories, recipe)
    picture = Image.open(io.BytesIO(base64.b64decode(image["src"].split(",", 1)[1])))
    assert picture.width > 900  # the three panels, drawn
    assert plt.get_fignums() == []
