"""lmpolicy: the shared library of the course "The language model as a policy".

Each module holds one concept and imports on its own:

- ``tokenizer``  : the 15-token vocabulary of TinyLM and prompt/response encoding
- ``model``      : TinyLM, a ~100k-parameter decoder-only transformer
- ``generate``   : batched sampling with a KV cache (temperature, top-k, top-p)
- ``rewards``    : the verifier reward and accuracy metrics
- ``exact``      : exact solvers for toy language models given as next-token tables
- ``scenarios``  : the three toy models of the tilting demo
"""

__version__ = "0.1.0"
