"""The one exception type for *bad input*: the CLI maps it (and only it) to exit code 2.

Bad input is something the user can fix without touching the code: a malformed ``params.yaml``, a missing
or truncated raw file, a dataset rejecting too many rows, an unknown method name. Anything else (a bug)
stays a traceback with exit code 1, so it is reported instead of being mistaken for a user error.
"""

from __future__ import annotations


class InputError(Exception):
    """A problem with what the user supplied (params, raw files, options); the message says what and where."""


class ParamsError(InputError):
    """``params.yaml`` is invalid: unknown key, wrong type or out-of-range value (``params.yaml: a.b: ...``)."""
