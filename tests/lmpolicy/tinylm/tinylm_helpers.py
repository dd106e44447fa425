"""Helpers shared by the TinyLM tests."""
import torch

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
