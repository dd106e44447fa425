"""lmpolicy.checks: failures carry a message a student can act on; done() and the shortcut guard."""
import json

import numpy as np
import pytest
import torch

from lmpolicy import checks, progress


def first_line(excinfo) -> str:
    return str(excinfo.value).splitlines()[0]


def test_check_type_names_what_was_returned_and_what_is_wanted():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_type([0.5, 0.5], torch.Tensor, "softmax(logits)")
    assert first_line(excinfo) == "softmax(logits) returned a list; return a torch.Tensor"
    assert isinstance(excinfo.value, AssertionError)
    tensor = torch.zeros(2)
    assert checks.check_type(tensor, torch.Tensor, "softmax(logits)") is tensor


def test_a_stub_answer_is_reported_as_a_stub():
    with pytest.raises(checks.CheckFailed, match="p_86 is None: the answer is still a stub"):
        checks.check_number(None, "p_86")
    with pytest.raises(checks.CheckFailed, match="returned None"):
        checks.check_close(None, 1.0, "softmax(z)")


def test_check_number_accepts_scalars_of_every_kind_and_rejects_the_rest():
    for value in (0.25, np.float32(0.25), torch.tensor(0.25), np.array([0.25]), 1 / 4):
        assert checks.check_number(value, "x") == 0.25
    with pytest.raises(checks.CheckFailed, match="x is a str; it should be a number"):
        checks.check_number("0.25", "x")
    with pytest.raises(checks.CheckFailed, match=r"2 numbers \(shape \(2,\)\)"):
        checks.check_number(torch.zeros(2), "x")


def test_check_shape_shows_both_shapes():
    with pytest.raises(checks.CheckFailed, match=r"probs has shape \(2, 3\); expected \(3,\)"):
        checks.check_shape(torch.zeros(2, 3), (3,), "probs")
    with pytest.raises(checks.CheckFailed, match="has no shape"):
        checks.check_shape([1, 2, 3], (3,), "probs")


def test_check_finite_says_which_value_and_where():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_finite(torch.tensor([[0.0, 1.0], [float("-inf"), float("nan")]]), "logp")
    assert first_line(excinfo) == "logp contains -inf at index (1, 0) (2 of 4 entries are not finite)"
    with pytest.raises(checks.CheckFailed, match="contains NaN"):
        checks.check_finite(float("nan"), "entropy")


def test_check_close_shows_expected_and_got_at_the_worst_entry_and_the_hint():
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_close(np.array([0.1, 0.2, 0.9]), [0.1, 0.25, 0.65], "probs", hint="divide by the sum")
    lines = str(excinfo.value).splitlines()
    assert lines[0] == "probs is off at index (2,): expected 0.65, got 0.9"
    assert lines[1] == "Hint: divide by the sum"
    checks.check_close(torch.tensor([0.1, 0.2]), [0.1, 0.2 + 1e-7], "probs")
    with pytest.raises(checks.CheckFailed, match="expected 2, got 2.1"):
        checks.check_close(2.1, 2.0, "J", atol=0.05, rtol=0)
    checks.check_close(2.04, 2.0, "J", atol=0.05, rtol=0)


def test_check_equal_is_exact_and_says_where_it_differs():
    checks.check_equal(torch.tensor([2.0, float("-inf")]), [2.0, -np.inf], "filtered")
    checks.check_equal(torch.tensor([True, False]), np.array([1, 0]), "mask")
    with pytest.raises(checks.CheckFailed) as excinfo:
        checks.check_equal(torch.tensor([[1, 2], [3, 4]]), [[1, 2], [3, 5]], "ids", hint="h")
    assert str(excinfo.value).splitlines() == ["ids is wrong at index (1, 1): expected 5, got 4 (1 of 4 entries differ)",
                                              "Hint: h"]
    with pytest.raises(checks.CheckFailed, match="expected -inf, got 1"):
        checks.check_equal([1.0], [-np.inf], "filtered")
    with pytest.raises(checks.CheckFailed, match=r"shape \(3,\); expected \(2,\)"):
        checks.check_equal([1, 2, 3], [1, 2], "ids")


def test_call_student_reports_the_students_exception_in_words():
    def softmax(z):
        raise ValueError("bad logits")

    with pytest.raises(checks.StudentCodeRaised) as excinfo:
        checks.call_student(softmax, torch.zeros(3))
    assert first_line(excinfo) == "your function softmax raised ValueError: bad logits"

    def stub(z):
        raise NotImplementedError()

    with pytest.raises(checks.StudentCodeRaised, match="not written yet"):
        checks.call_student(stub, 1)
    with pytest.raises(checks.CheckFailed, match="not a function"):
        checks.call_student(3.0, 1)
    assert checks.call_student(lambda a, b=0: a + b, 1, b=2) == 3


def test_done_records_progress_and_prints_the_label(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "p.json"))
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    checks.done("ex11_1a")
    assert capsys.readouterr().out.strip() == "\u2713 11.1(a) passed the visible checks"
    assert set(json.loads((tmp_path / "p.json").read_text())["done"]) == {"ex11_1a"}
    checks.mark_done("ex11_1b")
    assert set(progress.load()) == {"ex11_1a", "ex11_1b"}


def test_done_writes_nothing_under_the_grader(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "p.json"))
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    checks.done("ex11_1a")
    checks.mark_done("ex11_1b")
    assert not (tmp_path / "p.json").exists()
    assert "11.1(a)" in capsys.readouterr().out


def test_done_still_passes_when_the_progress_file_cannot_be_written(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(blocker / "progress.json"))  # parent is a file
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    checks.done("ex11_1a")
    out = capsys.readouterr().out
    assert "could not be saved" in out and "\u2713 11.1(a) passed the visible checks" in out


def test_done_rejects_an_unknown_exercise_key():
    with pytest.raises(KeyError, match="unknown exercise key 'ex11_99'"):
        checks.done("ex11_99")


def test_no_library_shortcut_blocks_every_alias_and_restores_afterwards():
    import torch.nn.functional as F
    from torch.nn.functional import softmax as aliased  # bound before the guard starts

    z = torch.tensor([2.0, 1.0, 0.0])
    with checks.no_library_shortcut(F.softmax, torch.softmax):
        for student in (lambda x: aliased(x, -1), lambda x: F.softmax(x, -1), lambda x: torch.softmax(x, -1)):
            with pytest.raises(checks.LibraryShortcutUsed) as excinfo:
                checks.call_student(student, z)
            assert "implement this yourself: calling torch." in first_line(excinfo)
            assert "gets no credit" in first_line(excinfo)
        assert torch.exp(z).sum() > 0  # unrelated functions still work
    expected = np.exp([2.0, 1.0, 0.0]) / np.exp([2.0, 1.0, 0.0]).sum()
    checks.check_close(aliased(z, -1), expected, "softmax after the guard")
    checks.check_close(torch.softmax(z, -1), expected, "torch.softmax after the guard")


def test_no_library_shortcut_blocks_a_tensor_method_and_restores_it():
    z = torch.tensor([2.0, 1.0, 0.0])
    with checks.no_library_shortcut(torch.Tensor.softmax):
        with pytest.raises(checks.LibraryShortcutUsed, match=r"calling \.softmax\(\) gets no credit"):
            checks.call_student(lambda x: x.softmax(-1), z)
        with pytest.raises(checks.LibraryShortcutUsed):
            checks.call_student(lambda x: torch.nn.Parameter(x).softmax(-1), z)
    assert "softmax" not in vars(torch.Tensor)
    expected = np.exp([2.0, 1.0, 0.0]) / np.exp([2.0, 1.0, 0.0]).sum()
    checks.check_close(z.softmax(-1), expected, "Tensor.softmax after the guard")


def test_no_library_shortcut_restores_even_when_the_block_raises():
    import torch.nn.functional as F

    with pytest.raises(RuntimeError):
        with checks.no_library_shortcut(F.softmax):
            raise RuntimeError("test cell error")
    assert torch.allclose(F.softmax(torch.zeros(2), -1), torch.full((2,), 0.5))
