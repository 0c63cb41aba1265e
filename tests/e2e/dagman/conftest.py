"""One personal pool for the DAGMan end-to-end tests (a module's tests share it: a pool takes
seconds to start and each test's DAG lives in its own directory).

Startd ``a`` has 24 static slots so wide DAGs of /bin/true run many nodes at once. The test process
points GRIDBUS_URL at the pool, as a user's shell would; DAGMan jobs inherit it through the
environment `submit_dag`/`Submit.from_dag` put in their submit description.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from tests.e2e.pool import Pool, standard_pool

pytestmark = pytest.mark.e2e

SLOTS = {"GRIDBUS_NUM_CPUS": "24", "GRIDBUS_NUM_SLOTS": "24", "GRIDBUS_MEMORY": "24576"}


@pytest.fixture(scope="module")
def dag_pool(broker_url: BrokerURL, mgmt: Management, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    saved = {k: os.environ.get(k) for k in ("GRIDBUS_URL", "GRIDBUS_DAGMAN_USER_LOG_SCAN_INTERVAL")}
    try:
        with standard_pool(broker_url, mgmt, tmp_path_factory.mktemp("dagpool"), "dagman", slots=SLOTS,
                           schedd_env={"GRIDBUS_SCHEDD_RUN_LOCAL_JOBS_AS_SELF": "true"}) as pool:
            os.environ["GRIDBUS_URL"] = pool.url
            os.environ["GRIDBUS_DAGMAN_USER_LOG_SCAN_INTERVAL"] = "1"
            yield pool
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def dag_dir(tmp_path: Path) -> Path:
    return tmp_path
