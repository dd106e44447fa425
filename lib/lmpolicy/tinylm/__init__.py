"""TinyLM: the chapter's policy, a ~100k-parameter transformer that adds two numbers, and its training.

- ``tokenizer``  : the 15-token vocabulary, prompt and response encoding
- ``problems``   : the held-out and training addition problems
- ``model``      : the decoder-only transformer and its shipped checkpoint
- ``generate``   : batched sampling with a KV cache (temperature, top-k, top-p)
- ``logprobs``   : the log-prob plumbing (shift, prompt mask, padding mask)
- ``rewards``    : the verifier reward
- ``evaluate``   : the accuracy metrics and the exact KL; ``python -m lmpolicy.tinylm.evaluate``, the checkpoint's figures
- ``pretraining``: ``python -m lmpolicy.tinylm.pretraining``, the recipe of the shipped checkpoint
- ``runs``       : what every fine-tuning run shares: its budget, the held-out probe, the history, the loop
- ``reinforce``  : REINFORCE with the verifier (notebook 08), and rejection-sampling fine-tuning
- ``sft``        : supervised fine-tuning on more worked examples, the baseline REINFORCE is compared with

Each training module is a command line made from its settings dataclass with ``tyro``
(``python -m lmpolicy.tinylm.reinforce --help``).
"""
