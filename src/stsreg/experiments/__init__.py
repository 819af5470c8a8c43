"""The paper's experiments, apart from the product pipeline (data -> stage 1 -> stage 2 -> evaluation -> release).

``explore/``: dev-only explorations around the cosine objectives, one module each, run with
``python -m stsreg.experiments.explore.<name>`` from the project root; their outputs stay under ``reports/explore/``.
Nothing in the product pipeline imports this package.
"""
