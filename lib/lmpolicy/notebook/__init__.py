"""The notebook runtime: what a notebook's cells and checks need while a student works.

Checks whose failure says what is wrong, the code rule, each exercise's shortcuts, the catalogue of exercises,
the student's progress record and the verdicts Validate prints. Its modules, one line each, are listed in
docs/architecture.md.
"""
