"""Helpers shared by the TinyLM tests."""
import dataclasses

import torch

from lmpolicy.tinylm import reinforce
from lmpolicy.tinylm.model import TinyLM, TinyLMConfig


def sharpened_tinylm(seed: int, scale: float) -> TinyLM:
    """A random TinyLM with every weight multiplied by ``scale``.

    Random initialisation gives nearly uniform attention and next-token distributions; scaling the
    weights up makes them peaked and varied, so masking and caching mistakes show in the outputs.
    """
    torch.manual_seed(seed)
    model = TinyLM(TinyLMConfig()).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)
    return model


def tiny_recipe(**changes):
    """One or two cheap updates on an untrained TinyLM, measured only at the start and the end."""
    settings = dict(threads=1, prompts_per_update=8, samples_per_prompt=4, max_updates=1, eval_every_updates=1000,
                    stop_at_target=False, skip_uniform_prompts=False, heldout_measured=50)
    settings.update(changes)
    return dataclasses.replace(reinforce.Recipe(), **settings)


def untrained_model():
    torch.manual_seed(0)
    return TinyLM().eval()
