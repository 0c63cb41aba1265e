"""A personal pool per tutorial module, started with ``PersonalPool`` (what the Personal-Pools
tutorial shows) in a vhost of its own, with intervals of about a second so jobs run at once.

The pool's configuration becomes the test process's (PersonalPool's use_config), so the cells'
``htcondor.Schedd()``, ``htcondor.Collector()`` and ``htcondor.param`` find it as a notebook finds
its pool; the working directory is the module's own temporary directory, where the cells write
their files.
"""

from __future__ import annotations

import getpass
import os
import socket
import uuid
from collections.abc import Iterator

import pytest

from tests.e2e.pool import BASE_ENV
from tests.e2e.tutorials.bindings import PersonalPool, htcondor

pytestmark = pytest.mark.e2e

# The e2e pools' short intervals (knob names without the GRIDBUS_ prefix), and the schedd named
# as the notebooks' is: user@host.
FAST = {name.removeprefix("GRIDBUS_"): value for name, value in BASE_ENV.items()}


@pytest.fixture(scope="module")
def module_vhost(mgmt, broker_url, request) -> Iterator[str]:
    name = f"gridbus-tutorial-{request.module.__name__.rsplit('.', 1)[-1][:30]}-{uuid.uuid4().hex[:8]}"
    mgmt.put_vhost(name)
    mgmt.put_permissions(name, broker_url.user, ".*", ".*", ".*")
    yield broker_url.with_vhost(name).url
    mgmt.delete_vhost(name)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, request) -> Iterator[str]:
    path = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    before = os.getcwd()
    os.chdir(path)
    try:
        yield str(path)
    finally:
        os.chdir(before)


@pytest.fixture(scope="module")
def env_of_module(module_vhost) -> Iterator[str]:
    """GRIDBUS_URL is the module's vhost, for the cells that start pools of their own."""
    saved = {k: os.environ.get(k) for k in ("GRIDBUS_URL", "GRIDBUS_CONFIG")}
    os.environ["GRIDBUS_URL"] = module_vhost
    os.environ.pop("GRIDBUS_CONFIG", None)
    try:
        yield module_vhost
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        htcondor.reload_config()
        htcondor.set_subsystem("TOOL")


@pytest.fixture(scope="module")
def tutorial_pool(env_of_module, workdir) -> Iterator[PersonalPool]:
    # Twelve cpus, as a workstation the notebooks run on might have: the ten 10-second sleeps of
    # one cell run side by side instead of holding up the next cell's jobs for 50 s.
    config = {**FAST, "SCHEDD_NAME": f"{getpass.getuser()}@{socket.getfqdn()}", "NUM_CPUS": "12"}
    pool = PersonalPool(local_dir=os.path.join(workdir, "pool"), url=env_of_module, config=config)
    pool.start()
    try:
        yield pool
    finally:
        pool.stop()
