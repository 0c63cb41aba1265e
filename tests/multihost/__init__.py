"""A pool of several hosts sharing no file, for tests of any issue (file transfer, leases, ...).

Each execute host (`Host`) is a network namespace reaching the broker through its own veth and a
mount and UTS namespace with its own ``/tmp``, ``/var/tmp``, ``/etc/hosts``, host name
(``<name>.gridbus.test``), FILESYSTEM_DOMAIN and UID_DOMAIN; its daemons are real processes. The
submit host (collector, negotiator, schedd, and the test process as the console) is this machine.
Nothing the submit host writes under the test's directory or ``/tmp`` is visible on an execute
host, and the other way round. Needs root (`unavailable()` says why not, for a skip).

A module's tests share one pool, e.g.::

    import pytest
    from tests.multihost import SCHEDD, multihost_pool, unavailable

    @pytest.fixture(scope="module")
    def hosts(broker_url, mgmt, tmp_path_factory):
        if why := unavailable():
            pytest.skip(why)
        with multihost_pool(broker_url, mgmt, tmp_path_factory.mktemp("pool"), "mine",
                            {"exec1": {}, "exec2": {"filesystem_domain": "shared.example"}},
                            env={"GRIDBUS_JOB_LEASE_DURATION": "5"}) as pool:
            yield pool

    def test_runs_on_exec1(hosts):
        exec1 = hosts.host("exec1")
        cluster = hosts.submit(SCHEDD, 1, cmd="/bin/sh", args="-c 'hostname > /tmp/where'",
                               requirements=f'TARGET.Machine == "{exec1.fqdn}"', Iwd="/")
        ...  # wait for the job in hosts.history(SCHEDD, ...)
        assert exec1.reach("/tmp/where").read_text() == exec1.fqdn + "\\n"
        exec1.link_down()   # cut exec1 off the broker (TCP stalls, as on an outage) ...
        exec1.link_up()     # ... and back

``hosts`` is a `MultiHostPool` (an e2e `Pool`): ``submit``, ``jobs``, ``history``, ``ads``,
``call``, ``log_of("startd@exec1", "StartLog")`` work as in the e2e tests; ``start_on(host, kind)``
starts another daemon on a host; ``host.run([...])`` runs a command there; ``host.reach(path)`` is
where the test finds a file of the host; ``add_host("laptop")`` adds a host with no daemon, where
``console_on(laptop, ["submit", "job.sub"], cwd=...)`` runs the ``gridbus`` command line as a user
of that machine would. ``tests.multihost.rss.PeakRss`` samples the daemons' (and the shadows')
peak resident memory while a test runs.
"""

from tests.multihost.host import DOMAIN, LOCAL_DIR, Host, remove_stale, unavailable
from tests.multihost.pool import COLLECTOR, NEGOTIATOR, SCHEDD, MultiHostPool, multihost_pool

__all__ = ["COLLECTOR", "DOMAIN", "LOCAL_DIR", "NEGOTIATOR", "SCHEDD", "Host", "MultiHostPool", "multihost_pool",
           "remove_stale", "unavailable"]
