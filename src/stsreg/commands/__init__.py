"""The command layer: one module per group of verbs, each verb's parser (``<verb>(sub, name)``: its flags with their
help and defaults) beside its handler (``cmd_<verb>(args)``). :data:`stsreg.cli.COMMANDS` declares which verbs are
stages, load the backbone and read which inputs.

- :mod:`.pipeline`: fetch, prepare, evaluate, register, promote, report;
- :mod:`.train`: train;
- :mod:`.studies`: compare, nli-table, baselines, search, claims, profile, preset;
- :mod:`.serving`: serve, encode, backbone;
- :mod:`.data`: data check | add;
- :mod:`.operations`: servers, deploy.
"""

from __future__ import annotations

PARAMS_HELP = "the params file (validated whole before anything runs)"


def add_params(parser) -> None:
    """The ``--params`` flag of a command that reads params.yaml (validated whole before it runs)."""
    parser.add_argument("--params", default="params.yaml", help=PARAMS_HELP)
