"""TinyLM: the chapter's policy, a ~100k-parameter transformer that adds two numbers, and its training.

Its modules, one line each, are listed in docs/architecture.md.
"""
