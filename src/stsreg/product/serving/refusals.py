"""The refusals of the request path: what the queue answers instead of vectors. The app turns each into its status:
:class:`Overloaded` 429 (with Retry-After), :class:`TooLarge` 413, :class:`ShuttingDown` 503."""

from __future__ import annotations


class Overloaded(Exception):
    """The queue holds as many tokens as it may: try again in ``retry_after`` seconds."""

    def __init__(self, queued: int, limit: int, retry_after: int):
        super().__init__(f"the server is busy: {queued} tokens queued of {limit}; retry in {retry_after} s")
        self.retry_after = retry_after


class ShuttingDown(Exception):
    """The server is stopping: a request still queued is answered with this (503)."""


class TooLarge(Exception):
    """A request of more tokens than the queue may ever hold, or (``truncate`` off) a text over the maximum length."""
