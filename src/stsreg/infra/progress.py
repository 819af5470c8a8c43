"""Progress where people wait: one bar for every long loop, on a terminal and in logs alike.

On a terminal, :func:`bar` is a tqdm bar (steps, rate, ETA, and what the loop adds as postfix: the latest dev score
and the best so far). Anywhere else (``make run`` piped to a file, a Prefect worker, CI) tqdm's redrawn line would be
either silent or thousands of carriage returns, so the same bar writes one log line every :data:`LOG_EVERY_S` seconds
instead (logger ``stsreg.progress``, which the CLI prints and Prefect's flow-run logs capture), plus a last line when
the loop ends; a loop shorter than that logs nothing:

    stage2: 1200/2880 (42%) [08:41<12:10, 2.30step/s, dev=88.12, best=88.40]
"""

from __future__ import annotations

import logging
import sys
import time

from tqdm.auto import tqdm

#: Seconds between two progress lines in logs (under the one-minute promise of the operations guide).
LOG_EVERY_S = 30.0
LOG_FORMAT = "{desc}: {n_fmt}/{total_fmt} ({percentage:.0f}%) [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
log = logging.getLogger("stsreg.progress")


class _LogLines:
    """A file-like target for tqdm that turns each refresh into one log line; a loop done within
    :data:`LOG_EVERY_S` seconds logs nothing (an evaluation's many short encodes would be noise, not progress)."""

    def __init__(self, logger: logging.Logger):
        self.logger, self.last, self.started = logger, "", time.monotonic()

    def write(self, text: str) -> None:
        line = text.strip("\r\n ")
        if line and line != self.last and time.monotonic() - self.started >= LOG_EVERY_S:
            self.last = line
            self.logger.info(line)

    def flush(self) -> None:
        pass


def on_terminal() -> bool:
    return sys.stderr.isatty()


def bar(iterable=None, *, total: int | None = None, desc: str = "", unit: str = "step", initial: int = 0,
        enabled: bool | None = None, **kw) -> tqdm:
    """A progress bar over ``iterable`` (or ``total`` steps): tqdm on a terminal, a log line every
    :data:`LOG_EVERY_S` s elsewhere. ``enabled``: False shows nothing (a rank other than 0, a nested loop), None: on."""
    if enabled is False:
        return tqdm(iterable, total=total, initial=initial, disable=True)
    if on_terminal():
        return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, **kw)
    return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, file=_LogLines(log),
                mininterval=LOG_EVERY_S, maxinterval=LOG_EVERY_S, miniters=1, bar_format=LOG_FORMAT, ascii=True, **kw)
