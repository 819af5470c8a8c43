"""Progress lines of a silent step: at the interval, with the elapsed time and the detail, and a closing line."""

import logging
import time

from pipelines.product.heartbeat import heartbeat


def test_heartbeat_logs_at_its_interval_until_the_step_ends(caplog):
    logger = logging.getLogger("test.heartbeat")
    with caplog.at_level(logging.INFO, logger="test.heartbeat"):
        with heartbeat(logger, "training", every_s=0.1, detail=lambda: "stage stage2"):
            time.sleep(0.55)
        time.sleep(0.3)  # nothing after the step
    lines = [r.getMessage() for r in caplog.records]
    still = [line for line in lines if line.startswith("still training after")]
    assert 3 <= len(still) <= 6 and all(line.endswith("(stage stage2)") for line in still)
    assert lines[-1].startswith("training took")
