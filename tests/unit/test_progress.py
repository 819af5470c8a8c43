"""Progress where people wait: off a terminal, a bar is a log line every LOG_EVERY_S seconds (steps, rate, ETA and
what the loop adds: the dev score and the best so far), and a loop shorter than that logs nothing."""

import logging
import time

from stsreg.infra import progress


def test_off_a_terminal_a_long_loop_logs_lines_with_rate_eta_and_postfix(monkeypatch, caplog):
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.05)
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    caplog.set_level(logging.INFO, logger="stsreg.progress")
    bar = progress.bar(total=20, desc="stage2", unit="step")
    bar.mininterval = bar.maxinterval = 0.05
    for step in range(20):
        time.sleep(0.01)
        bar.update(1)
        if step % 5 == 4:
            bar.set_postfix(dev=f"{80 + step:.2f}", best=f"{80 + step:.2f}")
    bar.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "stsreg.progress"]
    assert len(lines) >= 2 and lines[-1].startswith("stage2: 20/20 (100%) [")
    assert "step/s" in lines[-1] or "s/step" in lines[-1]
    assert "dev=99.00" in lines[-1] and "best=99.00" in lines[-1] and "\r" not in "".join(lines)


def test_off_a_terminal_a_short_loop_logs_nothing_and_a_disabled_bar_never(monkeypatch, caplog):
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    caplog.set_level(logging.INFO, logger="stsreg.progress")
    for _ in progress.bar(range(100), desc="encode"):
        pass
    for _ in progress.bar(range(100), desc="rank 1", enabled=False):
        pass
    assert not [r for r in caplog.records if r.name == "stsreg.progress"]
