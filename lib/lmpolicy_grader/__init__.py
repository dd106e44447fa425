"""The instructor's side of the course: nbgrader glue, parallel grading, honest reports.

`python -m lmpolicy_grader --help` lists the commands. The kernel-side tamper guard
(`lmpolicy_grader.guard`) is imported inside grading kernels, so this package imports nothing heavy.
"""
