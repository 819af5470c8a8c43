"""A subprocess that stops with the flow run that started it: ``dvc repro`` (and the stages and training it runs) is
its own process group, and a cancelled flow run (SIGTERM from the worker) stops the whole group, where before the
group outlived the run and had to be killed by hand."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading


@contextlib.contextmanager
def stopping(proc: subprocess.Popen, grace_s: float = 10.0, on_stop=None):
    """While ``proc`` (a process group of its own) runs: when this process is told to stop (SIGTERM: a flow run
    cancelled from the UI or ``prefect flow-run cancel``, a worker shutting down) or the block ends early (an
    exception, Ctrl-C), the whole group is stopped (SIGTERM, then SIGKILL after ``grace_s``), ``on_stop()`` is called
    (it says what the stopped run left), then the signal goes on to the handler that was there before."""
    def stop() -> None:
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if on_stop is not None:
            on_stop()

    def on_term(signum, frame):
        stop()
        if callable(previous):
            previous(signum, frame)
        else:  # the default: end this process as SIGTERM would have
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_term) if main else None
    try:
        yield
    finally:
        stop()
        if main:
            signal.signal(signal.SIGTERM, previous)
