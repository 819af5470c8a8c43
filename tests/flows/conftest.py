"""One Prefect test harness (a temporary Prefect server + database) for every flow test of the session."""

import pytest
from prefect.testing.utilities import prefect_test_harness


@pytest.fixture(scope="session")
def harness():
    with prefect_test_harness(server_startup_timeout=120):
        yield
