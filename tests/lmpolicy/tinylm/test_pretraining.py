import math
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from lmpolicy.tinylm.model import load_checkpoint
from lmpolicy.tinylm.problems import heldout_problems, validation_problems
from lmpolicy.tinylm.tokenizer import decode, decode_prompt
from lmpolicy.tinylm.pretraining import Settings, learning_rate, make_dataset, train

SHORT = replace(Settings(), n_examples=4_000, max_steps=30, warmup_steps=5, eval_every=1000, seed=7)


def test_short_run_lowers_the_loss_and_is_reproducible_from_its_seed():
    first = train(SHORT, progress=False)
    again = train(SHORT, progress=False)
    other = train(replace(SHORT, seed=8, max_steps=3), progress=False)
    assert first.steps == 30 and len(first.losses) == 30
    assert first.losses[0] == pytest.approx(math.log(15), abs=0.3)  # a fresh model is close to uniform
    assert sum(first.losses[-5:]) / 5 < 0.75 * sum(first.losses[:5]) / 5
    assert first.losses == again.losses
    for (name, p), q in zip(first.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.equal(p, q), name
    assert first.losses[:3] != other.losses


def test_dataset_rows_are_prompt_plus_correct_answer_and_never_unseen_problems():
    ids, mask = make_dataset(2_000, seed=0)
    assert ids.shape == (2_000, 11) and mask.shape == (2_000, 4)
    unseen = set(heldout_problems()) | set(validation_problems())
    for row, m in zip(ids[:200], mask[:200]):
        a, b = decode_prompt(row[:7])
        assert (a, b) not in unseen
        assert decode(row) == f"<bos>{a}+{b}={a + b}<eos>"
        assert m.sum().item() == len(str(a + b)) + 1


def test_learning_rate_warms_up_then_follows_a_cosine_to_zero():
    s = replace(Settings(), lr=1.0, warmup_steps=10, max_steps=110)
    assert learning_rate(0, s) == pytest.approx(0.1)
    assert learning_rate(9, s) == pytest.approx(1.0)
    assert learning_rate(60, s) == pytest.approx(0.5)  # half-way through the cosine
    assert learning_rate(110, s) == pytest.approx(0.0, abs=1e-12)


def test_command_line_writes_a_loadable_checkpoint(tmp_path):
    out = tmp_path / "tiny.pt"
    done = subprocess.run(
        [sys.executable, "-m", "lmpolicy.tinylm.pretraining", "--max-steps", "3", "--warmup-steps", "1", "--n-examples", "1000",
         "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "3 steps" in done.stdout
    model = load_checkpoint(out)
    assert model.num_parameters() == 102_735
    saved = torch.load(out, weights_only=True)
    assert saved["metadata"]["settings"]["max_steps"] == 3
