"""lmpolicy.progress: the local record survives corruption and lists every exercise once."""
import json
import re

import pytest

from lmpolicy import progress


@pytest.fixture
def progress_path(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "progress.json"
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(path))
    return path


def test_default_location_is_in_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("LMPOLICY_PROGRESS_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert progress.progress_file() == tmp_path / ".lmpolicy" / "progress.json"


def test_record_then_load_round_trips_and_keeps_the_first_time(progress_path):
    assert progress.load() == {}
    progress.record("task2")
    first = progress.load()["task2"]
    progress.record("task2")
    progress.record("ex11_3c")
    assert progress.load() == {"task2": first, "ex11_3c": progress.load()["ex11_3c"]}
    data = json.loads(progress_path.read_text())
    assert data["version"] == 1
    assert list(progress_path.parent.iterdir()) == [progress_path]  # no temporary file left behind


def test_a_corrupt_file_is_moved_aside_with_a_warning_not_lost(progress_path):
    progress_path.parent.mkdir(parents=True)
    progress_path.write_text("{not json")
    with pytest.warns(progress.ProgressFileCorrupt, match="could not be read"):
        assert progress.load() == {}
    aside = [p for p in progress_path.parent.iterdir() if p.name.startswith("progress.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_text() == "{not json"
    progress.record("task1a")
    assert set(progress.load()) == {"task1a"}


def test_a_file_of_the_wrong_shape_counts_as_corrupt(progress_path):
    progress_path.parent.mkdir(parents=True)
    progress_path.write_text(json.dumps({"done": ["ex11_1a"]}))
    with pytest.warns(progress.ProgressFileCorrupt):
        assert progress.load() == {}


def test_unknown_keys_are_refused(progress_path):
    with pytest.raises(KeyError, match="unknown exercise key"):
        progress.record("ex11_11a")
    assert not progress_path.exists()


def test_the_exercise_list_covers_the_chapter_and_the_lab_once_each():
    keys = [exercise.key for exercise in progress.EXERCISES]
    assert len(keys) == len(set(keys))
    chapter = {int(m.group(1)) for k in keys if (m := re.fullmatch(r"ex11_(\d+)[a-z]?", k))}
    assert chapter == set(range(1, 11))
    assert {"task1a", "task1b", "task2", "task3", "task4", "task5"} <= set(keys)
    for exercise in progress.EXERCISES:
        assert re.fullmatch(r"(ex11_\d+[a-z]?|task\d[ab]?|nb\d\d_[a-z0-9_]+)", exercise.key), exercise.key
        assert re.fullmatch(r"\d\d_[a-z0-9_]+", exercise.notebook), exercise.notebook


def test_table_shows_done_and_not_yet_for_every_exercise(progress_path):
    progress.record("ex11_2b")
    rows = progress.table()
    assert len(rows) == len(progress.EXERCISES)
    status = {label: state for label, _, _, state in rows}
    assert status["11.2(b)"] == "done"
    assert status["11.2(a)"] == "not yet"
    html = rows._repr_html_()
    assert html.count("<tr>") == len(progress.EXERCISES) + 1
    assert "<td>done</td>" in html
    assert "11.2(b)" in str(rows)
