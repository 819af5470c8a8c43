"""The product pipeline: data -> stage 1 -> stage 2 -> evaluation -> release (registry, promotion, serving).

``data/`` fetch and prepare, ``model`` and ``losses`` / ``objective`` / ``optim`` / ``precision`` / ``tokens``,
``training/`` the two stages' loops, ``runners/`` one entry per stage, ``sts_eval`` + ``bootstrap_ci`` the
evaluation, ``registry`` / ``model_card`` / ``pyfunc_model`` / ``serve`` the release. It imports
:mod:`stsreg.infra` only, never :mod:`stsreg.experiments` (``tests/unit/test_layout.py``).
"""
