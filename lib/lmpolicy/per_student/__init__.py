"""Per-student numbers: each student's own parameters of the numeric exercises, their answer key, and the seeds
of the hidden tests' inputs. Its modules, one line each, are listed in docs/architecture.md.
"""
