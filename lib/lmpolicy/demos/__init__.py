"""The course's two interactive demos (ipywidgets + matplotlib), each a class with ``show()``.

- ``lmpolicy.demos.tilting.TiltingDemo``: "Tilting a toy language model"
- ``lmpolicy.demos.kl_estimators.KLEstimatorDemo``: "Three ways to estimate a KL"

Import the one you need from its module; this package imports nothing heavy by itself.
"""
