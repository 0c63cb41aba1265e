"""What the multi-host e2e tests share: the lease of their pool, waiting for jobs and slots."""

from __future__ import annotations

from tests.e2e.pool import wait_for
from tests.multihost import SCHEDD, MultiHostPool

LEASE = 5.0  # JOB_LEASE_DURATION of the module pools: a host cut off loses its claims within seconds
STALL = 3.0  # TRANSFER_STALL_TIMEOUT: seconds of silence that end a file transfer


def all_unclaimed(pool: MultiHostPool) -> bool:
    """Every startd's two slots advertised, all Unclaimed."""
    startds = sum(1 for address in pool.procs if address.startswith("startd@"))
    ads = pool.ads("Machine")
    return len(ads) == 2 * startds and all(a.get("State") == "Unclaimed" for a in ads)


def on(host_fqdn: str) -> str:
    """A Requirements clause for one host."""
    return f'TARGET.Machine == "{host_fqdn}"'


def finished(pool: MultiHostPool, cluster: int, n: int = 1, timeout: float = 30) -> list[dict]:
    """The history records of a cluster's ``n`` jobs, once all are there."""
    return wait_for(f"{n} job(s) of cluster {cluster} in the history",
                    lambda: len(h := pool.history(SCHEDD, f"ClusterId == {cluster}")) == n and h, timeout)
