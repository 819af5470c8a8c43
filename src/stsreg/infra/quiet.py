"""Third-party lines a person reading a run should not have to read, dropped where they are raised.

Each is named by its message, so that every other warning of the same library still shows:

    with quiet(warnings=("Add type hints to the `predict` method",), logs={"mlflow.pyfunc": ("Passing a Python
    object",)}):
        mlflow.pyfunc.save_model(...)
"""

from __future__ import annotations

import logging
import re
import warnings as _warnings
from collections.abc import Iterator
from contextlib import contextmanager


class _DropMessages(logging.Filter):
    def __init__(self, prefixes: tuple[str, ...]):
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


@contextmanager
def quiet(warnings: tuple[str, ...] = (), categories: tuple[type[Warning], ...] = (),
          logs: dict[str, tuple[str, ...]] | None = None) -> Iterator[None]:
    """Inside the block: warnings whose message contains one of ``warnings`` (plain text; MLflow colours some of its
    messages, so they do not start with their words) or of a class in ``categories`` are not shown; log records of
    logger ``name`` (``""``: the root) whose message starts with one of ``logs[name]`` are dropped."""
    filters = [(logging.getLogger(name or None), _DropMessages(prefixes)) for name, prefixes in (logs or {}).items()]
    with _warnings.catch_warnings():
        for prefix in warnings:
            _warnings.filterwarnings("ignore", message=".*" + re.escape(prefix))
        if warnings:  # a library that resets the filters around its own call (MLflow's "show once") is caught here
            shown = _warnings.showwarning

            def show(message, category, filename, lineno, file=None, line=None):
                if not any(text in str(message) for text in warnings):
                    shown(message, category, filename, lineno, file, line)

            _warnings.showwarning = show
        for category in categories:
            _warnings.filterwarnings("ignore", category=category)
        for logger, f in filters:
            logger.addFilter(f)
        try:
            yield
        finally:
            for logger, f in filters:
                logger.removeFilter(f)
