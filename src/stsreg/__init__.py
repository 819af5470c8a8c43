"""stsreg: sentence similarity as regression (Zhang & Li, EMNLP 2024) as an MLOps pipeline.

The package has no import-time side effects: nothing here sets tracking URIs, creates folders or
configures logging. Entry points live in :mod:`stsreg.cli`.
"""

__version__ = "0.1.0"
