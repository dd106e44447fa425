"""lmpolicy: the student's library of the course "The language model as a policy".

- ``tinylm``   : TinyLM (tokenizer, model, sampling, log-probs, rewards) and its training
- ``exact``    : exact solvers for toy language models (temperature, tilting, KL, scenarios)
- ``checks``   : what notebook test cells call: checks with messages a student can act on
- ``progress`` : the student's record of finished exercises
- ``demos``    : the two ipywidgets demos

The instructor's grader is a separate package, ``lmpolicy_grader``; nothing here imports it or nbgrader.
"""

__version__ = "0.1.0"
