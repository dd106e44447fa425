"""Exact solvers for toy language models: every quantity computed by enumerating the responses.

- ``numeric``    : the checks and log-space helpers the others share (distributions, positivity)
- ``toy``        : a toy language model given as next-token tables
- ``temperature``: softmax, token-level temperature, the power distribution
- ``tilting``    : the KL-regularised objective, its optimum pi*, soft values
- ``kl``         : KL divergences and the k1, k2, k3 estimators
- ``scenarios``  : the three toy models of the tilting demo, and the KL demo's policy
"""
