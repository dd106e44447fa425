"""The student's local record of finished exercises ("I've done this one", made automatic).

A visible check that passes calls ``lmpolicy.checks.done(key)``, which calls ``record(key)`` here.
The record is a small JSON file at ``$LMPOLICY_PROGRESS_FILE`` or ``~/.lmpolicy/progress.json``:

    {"version": 1, "done": {"ex11_1a": "2026-11-30T15:02:11+00:00", ...}}

``EXERCISES`` is the one list of the chapter's exercises and lab tasks, with the notebook that holds
each; the start page's table and the notebook tests both read it.
"""
from __future__ import annotations

import datetime
import html
import json
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Exercise:
    key: str        # prefix of every grade_id of the exercise: "ex11_1a" -> "ex11_1a__tests"
    label: str      # what a student reads: "11.1(a)"
    notebook: str   # the source notebook's name, without ".ipynb"
    title: str      # a few words on what it asks


def _exercises(notebook: str, *rows: tuple[str, str, str]) -> list[Exercise]:
    return [Exercise(key, label, notebook, title) for key, label, title in rows]


EXERCISES: tuple[Exercise, ...] = tuple(
    _exercises(
        "01_policy_softmax",
        ("nb01_softmax", "softmax", "a numerically stable softmax"),
        ("ex11_1a", "11.1(a)", "a response's probability and log-prob"),
        ("ex11_1b", "11.1(b)", "the log-prob is a sum (proof)"),
    )
    + _exercises(
        "02_temperature",
        ("task2", "Lab Task 2", "sample_with_temperature"),
        ("nb02_top_k", "top-k", "the top-k filter"),
        ("nb02_top_p", "top-p", "the top-p (nucleus) filter"),
        ("ex11_2a", "11.2(a)", "temperature as a power (proof)"),
        ("ex11_2b", "11.2(b)", "the temperature that gives the top token 0.95"),
        ("ex11_2c", "11.2(c)", "dH/dkappa = -kappa Var(z)"),
    )
    + _exercises(
        "03_three_stages",
        ("ex11_1c", "11.1(c)", "rejection-sampling fine-tuning vs REINFORCE"),
        ("nb03_four_reasons", "why RL after SFT", "the four reasons (concept)"),
    )
    + _exercises(
        "04_two_mdp_views",
        ("ex11_3a", "11.3(a)", "the bandit policy gradient"),
        ("ex11_3b", "11.3(b)", "the token-level gradient, with and without baseline"),
        ("ex11_3c", "11.3(c)", "the chain rule for KL"),
    )
    + _exercises(
        "05_tilted_optimum",
        ("task4", "Lab Task 4", "tilted_optimum and kl_objective"),
        ("task5", "Lab Task 5", "token_level_optimum"),
        ("ex11_5a", "11.5(a)", "derive the tilted optimum"),
        ("ex11_5b", "11.5(b)", "the worked example at beta = 0.5"),
        ("ex11_5c", "11.5(c)", "the limits beta -> 0 and beta -> infinity"),
        ("ex11_7a", "11.7(a)", "the power distribution as a tilted optimum"),
        ("ex11_7b", "11.7(b)", "token temperature is not sequence temperature"),
        ("ex11_7c", "11.7(c)", "the difference through soft values"),
        ("ex11_8a", "11.8(a)", "where a reward model errs"),
        ("ex11_8b", "11.8(b)", "the blind spot"),
        ("ex11_8c", "11.8(c)", "reasons for and against beta > 0"),
        ("ex11_8d", "11.8(d)", "clip and KL"),
        ("ex11_9a", "11.9(a)", "tilting demo: beta = 0.5"),
        ("ex11_9b", "11.9(b)", "tilting demo: temperature vs beta"),
        ("ex11_9c", "11.9(c)", "tilting demo: the blind spot"),
    )
    + _exercises(
        "06_kl_estimators",
        ("task3", "Lab Task 3", "kl_estimators"),
        ("ex11_4a", "11.4(a)", "k3 is non-negative"),
        ("ex11_4b", "11.4(b)", "k3 is unbiased"),
        ("ex11_4c", "11.4(c)", "k1 and k3 on a sharp policy"),
        ("ex11_4d", "11.4(d)", "k3 from 16 samples"),
        ("ex11_6a", "11.6(a)", "the gradient of the reverse KL"),
        ("ex11_6b", "11.6(b)", "KL in the reward"),
        ("ex11_6c", "11.6(c)", "KL in the loss: k1, k2, k3"),
        ("ex11_9d", "11.9(d)", "KL demo: k3 at N = 16"),
    )
    + _exercises(
        "07_logprob_plumbing",
        ("task1a", "Lab Task 1a", "response_logprobs"),
        ("task1b", "Lab Task 1b", "sequence_logprob with a mask"),
    )
    + _exercises(
        "08_tinylm_reinforce",
        ("nb08_baseline", "leave-one-out baseline", "the baseline from the other answers to the same prompt"),
        ("nb08_kl_reward", "KL in the reward", "the k1 penalty folded into each answer's reward"),
        ("nb08_pg_loss", "policy-gradient loss", "the REINFORCE loss over response tokens"),
        ("ex11_10", "11.10", "the lab's questions"),
    )
)

EXERCISES_BY_KEY: dict[str, Exercise] = {exercise.key: exercise for exercise in EXERCISES}
GRADE_ID_SEPARATOR = "__"


def exercise_key(grade_id: str) -> str:
    """The exercise a cell belongs to, from its nbgrader grade id: ``ex11_1a__tests`` -> ``ex11_1a``.

    The one statement of the naming rule (docs/architecture.md, "Notebooks"): every grade id is the
    exercise key, two underscores, and a name. A grade id without the separator is its own key.
    """
    return grade_id.split(GRADE_ID_SEPARATOR, 1)[0]


class ProgressFileCorrupt(UserWarning):
    """The progress file could not be read; it was moved aside, not deleted."""


def progress_file() -> Path:
    """Where the record lives: ``$LMPOLICY_PROGRESS_FILE`` or ``~/.lmpolicy/progress.json``."""
    configured = os.environ.get("LMPOLICY_PROGRESS_FILE")
    return Path(configured) if configured else Path.home() / ".lmpolicy" / "progress.json"


def exercise(key: str) -> Exercise:
    """The exercise with this key; a clear error for a key that is not in ``EXERCISES``."""
    try:
        return EXERCISES_BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown exercise key {key!r}: lmpolicy.progress.EXERCISES lists the known ones") from None


def load() -> dict[str, str]:
    """Finished exercises, ``{key: when first passed (ISO time)}``; empty if there is no file yet.

    A file that cannot be read is moved aside (``progress.json.corrupt-<time>``) with a warning
    naming both paths, so nothing is silently lost.
    """
    path = progress_file()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        done = data["done"]
        if not isinstance(done, dict) or not all(isinstance(v, str) for v in done.values()):
            raise ValueError("'done' is not a mapping of exercise keys to times")
    except (OSError, ValueError, KeyError, TypeError) as error:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        os.replace(path, aside)
        warnings.warn(
            f"your progress file {path} could not be read ({error}); it was moved to {aside} "
            "and a fresh record starts now",
            ProgressFileCorrupt,
            stacklevel=2,
        )
        return {}
    return dict(done)


def _write_atomically(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=1, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def record(key: str) -> None:
    """Mark exercise ``key`` as done (keeps the time it was first done)."""
    exercise(key)
    done = load()
    if key not in done:
        done[key] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        _write_atomically(progress_file(), {"version": FORMAT_VERSION, "done": done})


class ProgressTable(list):
    """Rows ``(label, title, notebook, status)``; shows as an HTML table in Jupyter."""

    HEADER = ("exercise", "what", "notebook", "status")

    def _repr_html_(self) -> str:
        def row(cells, tag="td"):
            return "<tr>" + "".join(f"<{tag}>{html.escape(str(c))}</{tag}>" for c in cells) + "</tr>"

        body = "".join(row(r) for r in self)
        return f"<table>{row(self.HEADER, 'th')}{body}</table>"

    def __str__(self) -> str:
        rows = [self.HEADER, *self]
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(self.HEADER))]
        return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def table() -> ProgressTable:
    """Every exercise of 11.1-11.10 and lab task 1a-5, with "done" or "not yet"."""
    done = load()
    return ProgressTable(
        (ex.label, ex.title, ex.notebook, "done" if ex.key in done else "not yet") for ex in EXERCISES
    )
