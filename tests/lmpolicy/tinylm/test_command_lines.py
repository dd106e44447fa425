"""The command lines made from the settings dataclasses (tyro): flags by field name, booleans as --flag / --no-flag."""
import subprocess
import sys

import pytest

from lmpolicy.tinylm.model import CHECKPOINT_PATH

needs_checkpoint = pytest.mark.skipif(not CHECKPOINT_PATH.exists(), reason="the shipped checkpoint is not there yet")


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("module, flag", [
    ("lmpolicy.tinylm.reinforce", "--prioritize-prompts"),
    ("lmpolicy.tinylm.sft", "--stop-at-target"),
    ("lmpolicy.tinylm.evaluate", "--json"),
])
def test_a_boolean_flag_followed_by_false_is_refused_never_read_as_true(module, flag):
    done = run_module(module, flag, "False")
    assert done.returncode != 0
    assert "False" in done.stderr  # tyro names the argument it could not use
    assert "Unrecognized" in done.stderr


@needs_checkpoint
def test_reinforce_command_line_sets_a_boolean_to_false_with_no_flag():
    done = run_module("lmpolicy.tinylm.reinforce", "--no-prioritize-prompts", "--max-updates", "1",
                      "--prompts-per-update", "8", "--heldout-measured", "20", "--threads", "1")
    assert done.returncode == 0, done.stderr
    assert "prioritize_prompts=False" in done.stdout and "prompts_per_update=8" in done.stdout
    assert "'updates': 1" in done.stdout  # it trained one update and measured it


@needs_checkpoint
def test_reinforce_command_line_prints_each_held_out_measurement():
    done = run_module("lmpolicy.tinylm.reinforce", "--max-updates", "2", "--eval-every-updates", "1",
                      "--prompts-per-update", "8", "--heldout-measured", "20", "--no-stop-at-target")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split() == ["update", "answers", "greedy", "sampled", "KL"])
    rows = [line.split() for line in lines[header + 1:header + 4]]
    assert [row[:2] for row in rows] == [["0", "0"], ["1", "32"], ["2", "64"]]  # 8 prompts x 4 answers an update
    for row in rows:
        assert 0 <= float(row[2]) <= 1 and 0 <= float(row[3]) <= 1 and float(row[4]) >= 0
    assert float(rows[0][4]) == 0.0  # before any update the policy is its reference


@needs_checkpoint
def test_sft_command_line_takes_its_recipe_fields_as_flags():
    done = run_module("lmpolicy.tinylm.sft", "--max-updates", "2", "--n-examples", "1000", "--batch-size", "16",
                      "--heldout-measured", "20", "--no-stop-at-target")
    assert done.returncode == 0, done.stderr
    assert "stop_at_target=False" in done.stdout and "batch_size=16" in done.stdout
    assert "'updates': 2" in done.stdout


@pytest.mark.parametrize("module, flag, comment", [
    ("lmpolicy.tinylm.pretraining", "--max-steps", "the cosine schedule decays to 0"),
    ("lmpolicy.tinylm.reinforce", "--no-prioritize-prompts", "earlier answers were wrong"),
    ("lmpolicy.tinylm.sft", "--batch-size", "examples were drawn with seed 0"),
    ("lmpolicy.tinylm.evaluate", "--samples-per-problem", "of the temperature-1 samples"),
])
def test_help_names_the_flags_with_the_comments_of_their_fields(module, flag, comment):
    done = run_module(module, "--help")
    assert done.returncode == 0, done.stderr
    assert flag in done.stdout
    assert comment in " ".join(done.stdout.split()).replace("│ ", "")  # tyro wraps the help text in a box
