"""lmpolicy: the shared library of the course "The language model as a policy".

Each module holds one concept and imports on its own:

- ``tokenizer``  : the 15-token vocabulary of TinyLM and prompt/response encoding
- ``model``      : TinyLM, a ~100k-parameter decoder-only transformer
- ``generate``   : batched sampling with a KV cache (temperature, top-k, top-p)
- ``logprobs``   : the log-prob plumbing (shift, prompt mask, padding mask)
- ``rewards``    : the verifier reward and accuracy metrics
- ``reinforce``  : REINFORCE on TinyLM with the verifier (notebook 08's training loop)
- ``sft``        : supervised fine-tuning on more worked examples, the baseline it is compared with
- ``problems``   : the held-out and training addition problems
- ``toy``        : a toy language model given as next-token tables
- ``tilting``    : the KL-regularised objective, its optimum pi*, soft values
- ``temperature``: softmax, token-level temperature, the power distribution
- ``kl``         : KL divergences and the k1, k2, k3 estimators
- ``scenarios``  : the three toy models of the tilting demo
- ``demos``      : the two ipywidgets demos
- ``checks``, ``progress``: what notebook test cells call, and the student's record
- ``course``     : the instructor's commands (release, grade)
"""

__version__ = "0.1.0"
