"""A hint followed word for word gives an answer that passes its check (a student does exactly what it says)."""
from __future__ import annotations

import inspect

from lmpolicy.exercises import nb02

TOP_K_HINT = "logits.topk(min(k, logits.shape[-1]), dim=-1).values[..., -1:]"


def test_the_top_k_hint_followed_word_for_word_passes_even_for_k_at_least_the_vocabulary(capsys):
    assert TOP_K_HINT in inspect.getsource(nb02)  # what the hint tells the student to write

    def top_k_filter(logits, k):  # the hint's expression, as written
        kth = logits.topk(min(k, logits.shape[-1]), dim=-1).values[..., -1:]
        return logits.masked_fill(logits < kth, float("-inf"))

    nb02.TOP_K_FILTER.check(top_k_filter)  # raises CheckFailed if any visible check fails
    assert "passed the visible checks" in capsys.readouterr().out
