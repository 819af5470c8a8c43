"""Progress where a user waits: a background thread that logs what a long step is doing at a fixed interval.

Scheduled work (the retrain's ``dvc repro``, the champion's 7-task evaluation) can stay silent for many minutes: a
training stage prints nothing between evaluations, an evaluation nothing between tasks. In the Prefect UI a silent
flow run looks hung. :func:`heartbeat` logs "still <doing what> after <elapsed> (<detail>)" to the flow-run log every
``every_s`` seconds (default :data:`EVERY_S`, under the one-minute promise of the operations guide) until the step
ends.

    with heartbeat(get_run_logger(), "dvc repro promote", detail=lambda: last_line):
        ...
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Seconds between two progress lines of a silent step.
EVERY_S = 30.0


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


@contextmanager
def heartbeat(logger, what: str, every_s: float = EVERY_S, detail: Callable[[], str] | None = None) -> Iterator[None]:
    """Log ``still {what} after {elapsed}`` (with ``detail()`` when given) every ``every_s`` seconds while the body
    runs; ``logger``: the flow run's logger (a ``logging.Logger`` or adapter), captured here because a thread has
    no Prefect run context of its own."""
    done = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not done.wait(every_s):
            extra = detail() if detail else ""
            logger.info("still %s after %s%s", what, _elapsed(time.monotonic() - started), f" ({extra})" if extra
                        else "")

    thread = threading.Thread(target=beat, name=f"heartbeat: {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        logger.info("%s took %s", what, _elapsed(time.monotonic() - started))
