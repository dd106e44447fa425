"""Exact solvers for toy language models: every quantity computed by enumerating the responses.

Its modules, one line each, are listed in docs/architecture.md.
"""
