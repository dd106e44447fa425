"""Notebook 08 run once as a student runs it: its execution test and its figures test share the run."""
import json

import pytest

from .notebook_tools import SOURCE_DIR, STUDENT_CELL_TIMEOUT, execute, read

NOTEBOOK08 = "08_tinylm_reinforce"
NOTEBOOK08_GROUP = "notebook08_as_a_student"  # the xdist group of every test that uses the run
FIGURES_MARK = "NOTEBOOK08 FIGURES "

# Appended to the notebook: what its runs ended at, read from the kernel's own variables (section 5's `run`
# and `history`, section 6's `no_leash`, `rft` and `more_sft`) and printed as one JSON line.
_FIGURES_CELL = f"""
import json as _json
def _figures(h):
    return {{"label": h.label, "updates_to_target": h.updates_to_target,
             **{{k: [float(x) for x in getattr(h, k)] for k in ("updates", "answers", "greedy", "sampled", "kl")}}}}
_again = evaluate_model(run.model, samples_per_problem=4, seed=0)
print({FIGURES_MARK!r} + _json.dumps({{
    "main": _figures(history), "no leash": _figures(no_leash), "rft": _figures(rft), "sft": _figures(more_sft),
    "recipe": {{k: getattr(run.recipe, k) for k in ("target_greedy", "target_sampled", "prompts_per_update",
                                                    "samples_per_prompt")}},
    "again": {{"greedy": _again.greedy_accuracy, "sampled": _again.expected_sampled_accuracy}}}}))
"""


@pytest.fixture(scope="session")
def notebook08_as_a_student(tmp_path_factory):
    """(the executed notebook without the appended cell, its progress file, the figures its runs ended at)."""
    import nbformat

    folder = tmp_path_factory.mktemp("notebook08")
    nb = read(SOURCE_DIR / f"{NOTEBOOK08}.ipynb")
    nb.cells.append(nbformat.v4.new_code_cell(_FIGURES_CELL))
    execute(nb, grader=False, progress_file=folder / "progress.json", timeout=STUDENT_CELL_TIMEOUT)
    figures_cell = nb.cells.pop()
    printed = "".join(o.get("text", "") for o in figures_cell.outputs if o.output_type == "stream")
    line = next(line for line in printed.splitlines() if line.startswith(FIGURES_MARK))
    return nb, folder / "progress.json", json.loads(line[len(FIGURES_MARK):])
