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


def test_an_export_prints_none_of_the_third_party_advice(tiny_backbone, tmp_path, caplog):
    """`make run`'s register step printed the tracer's and the quantiser's advice (3 warnings, a root WARNING) on every
    run; they are dropped where they are raised, other warnings still show."""
    import warnings

    from stsreg.product.serving import export
    from stsreg.product.model import SiameseRegressor

    SiameseRegressor.from_pretrained(tiny_backbone, max_length=16).save(tmp_path / "m")
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        export.export_all(tmp_path / "m")
        warnings.warn("a warning that matters", UserWarning)
    # DeprecationWarnings are hidden outside tests (Python's default filters); what a run shows is the rest
    shown = [str(w.message) for w in seen if not issubclass(w.category,
                                                            (DeprecationWarning, PendingDeprecationWarning))]
    assert shown == ["a warning that matters"], shown
    assert not [r for r in caplog.records if "pre-processing before quantization" in r.getMessage()]


def test_a_library_resetting_the_filters_is_still_quieted():
    """MLflow shows its type-hint advice under its own `simplefilter("once")`, which outranks any filter set around the
    call; `quiet` drops it where it is shown, and only it."""
    import warnings

    from stsreg.infra.quiet import quiet

    def library_call():
        with warnings.catch_warnings():
            warnings.simplefilter("once", category=UserWarning)
            warnings.warn("\x1b[33mAdd type hints to the `predict` method to enable data validation", UserWarning)
            warnings.warn("a warning that matters", UserWarning)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet(warnings=("Add type hints to the `predict` method",)):
            library_call()
    assert [str(w.message) for w in seen] == ["a warning that matters"]
