"""A pool over amqps:// with certificates (gridbus/tls.py): a RabbitMQ node of the test's own (its
own node name, ports and data directory; the machine's node at 5672 is never touched) listens
with TLS only, asks every client for a certificate signed by the test's CA, and serves its
management API over https. The daemons, the console and the management client connect with the
CA file and client certificates; a job runs; a client whose certificate another CA signed, or a
client without one, is refused."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pika
import pika.exceptions
import pytest

from gridbus.mgmt import Management
from tests import rabbit_cluster
from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.broker

PORT = 5699  # away from the machine's node (5672) and the test clusters (5781...)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d: Path) -> dict[str, Path]:
    """A CA; the broker's certificate (localhost, 127.0.0.1) and a client's, both signed by it;
    and a rogue CA with a client certificate of its own."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "san.cnf").write_text("subjectAltName = DNS:localhost, IP:127.0.0.1\n")
    for ca in ("ca", "rogue-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=gridbus test {ca}",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)
    for name, ca, ext in (("server", "ca", ["-extfile", "san.cnf"]), ("client", "ca", []),
                          ("rogue", "rogue-ca", [])):
        cn = "localhost" if name == "server" else f"gridbus-{name}"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                 "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *ext, cwd=d)
    for f in d.iterdir():
        f.chmod(0o644)  # the broker runs as the rabbitmq user
    return {n: d / n for n in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key",
                               "rogue.pem", "rogue.key")}


class TlsNode(rabbit_cluster.Node):
    """A node with a TLS listener only, client certificates required, management over https."""

    pki: dict[str, Path]

    @property
    def amqp_port(self) -> int:
        return PORT

    @property
    def mgmt_port(self) -> int:
        return PORT + 10_000

    @property
    def dist_port(self) -> int:
        return PORT + 20_000

    @property
    def url(self) -> str:
        return f"amqps://guest:guest@localhost:{PORT}/"

    @property
    def mgmt_url(self) -> str:
        return f"https://localhost:{self.mgmt_port}"

    def write_files(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "rabbitmq-env.conf").write_text("")
        (self.dir / "enabled_plugins").write_text("[rabbitmq_management].\n")
        p = self.pki
        (self.dir / "rabbitmq.conf").write_text(
            "listeners.tcp = none\n"
            f"listeners.ssl.default = 127.0.0.1:{PORT}\n"
            f"ssl_options.cacertfile = {p['ca.pem']}\n"
            f"ssl_options.certfile = {p['server.pem']}\n"
            f"ssl_options.keyfile = {p['server.key']}\n"
            "ssl_options.verify = verify_peer\n"
            "ssl_options.fail_if_no_peer_cert = true\n"
            "management.ssl.ip = 127.0.0.1\n"
            f"management.ssl.port = {self.mgmt_port}\n"
            f"management.ssl.cacertfile = {p['ca.pem']}\n"
            f"management.ssl.certfile = {p['server.pem']}\n"
            f"management.ssl.keyfile = {p['server.key']}\n"
            "loopback_users = none\n"
        )

    def wait_serving(self, timeout: float = 120) -> None:
        ctx = ssl.create_default_context(cafile=str(self.pki["ca.pem"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
                urllib.request.urlopen(self.mgmt_url + "/api/overview", timeout=2, context=ctx)
            except urllib.error.HTTPError:  # 401: it serves
                return
            except OSError:
                time.sleep(0.5)
                continue
            return
        raise rabbit_cluster.ClusterUnavailable(f"the TLS node did not serve on {PORT} within {timeout:g} s")


@pytest.fixture
def tls_node(tmp_path_factory):
    reason = rabbit_cluster.missing()
    if reason or not shutil.which("openssl"):
        pytest.skip(reason or "openssl is missing")
    base = Path(f"/tmp/gridbus-tls-{uuid.uuid4().hex[:8]}")
    base.mkdir(mode=0o755)
    cookie = base / ".erlang.cookie"
    cookie.write_text(rabbit_cluster.COOKIE)
    cookie.chmod(0o400)
    node = TlsNode(1, base, f"gbtls{uuid.uuid4().hex[:6]}")
    node.pki = make_pki(base / "pki")
    try:
        node.start()
        yield node
    finally:
        node.kill()
        shutil.rmtree(base, ignore_errors=True)


def _refused(url: str, ctx: ssl.SSLContext) -> str:
    params = pika.URLParameters(url)
    params.ssl_options = pika.SSLOptions(ctx, server_hostname="localhost")
    params.socket_timeout = 5
    with pytest.raises(pika.exceptions.AMQPConnectionError) as info:
        pika.BlockingConnection(params).close()
    return repr(info.value)


def test_a_pool_runs_a_job_over_tls_and_refuses_a_certificate_from_another_ca(tls_node, tmp_path, monkeypatch):
    pki = tls_node.pki
    knobs = {"GRIDBUS_TLS_CA_FILE": str(pki["ca.pem"]), "GRIDBUS_TLS_CERT_FILE": str(pki["client.pem"]),
             "GRIDBUS_TLS_KEY_FILE": str(pki["client.key"])}
    for k, v in knobs.items():
        monkeypatch.setenv(k, v)
    # The management API over https, with the same knobs.
    mgmt = Management(tls_node.mgmt_url)
    assert mgmt.overview()["listeners"]

    pool = Pool(tls_node.url, tmp_path / "pool", **knobs)
    try:
        pool.start("collector", "c")
        pool.start("negotiator", "n")
        pool.start("schedd", "s")
        pool.start("startd", "a", GRIDBUS_NUM_CPUS="1", GRIDBUS_NUM_SLOTS="1", GRIDBUS_MEMORY="512")
        pool.wait_serving("collector@c", "schedd@s", "negotiator@n", timeout=60)
        pool.wait_slots(1, timeout=60)
        cluster = pool.submit("schedd@s", 1, requirements="true")
        wait_for("the job to complete over TLS",
                 lambda: [j for j in pool.history("schedd@s", f"ClusterId == {cluster}", ["JobStatus"])
                          if j.get("JobStatus") == 4], 60)
        # A job whose files travel: the owner's shadow connects over TLS too (its certificate
        # comes from the schedd over the pipe).
        sub = tmp_path / "submit"
        sub.mkdir()
        (sub / "in.txt").write_text("over tls\n")
        (sub / "job.sh").write_text("#!/bin/sh\ncat in.txt > out.txt\n")
        (sub / "job.sh").chmod(0o755)
        cluster = pool.submit("schedd@s", 1, cmd=str(sub / "job.sh"), Iwd=str(sub), ShouldTransferFiles="YES",
                              TransferInput="in.txt")
        wait_for("the transfer job to complete over TLS",
                 lambda: [j for j in pool.history("schedd@s", f"ClusterId == {cluster}", ["JobStatus"])
                          if j.get("JobStatus") == 4], 60)
        assert (sub / "out.txt").read_text() == "over tls\n"
        # Every connection the broker has is a TLS one with a client certificate (the management
        # API lists connections after its statistics interval: wait for them).
        conns = wait_for("the daemons' connections listed", lambda: len(c := mgmt.connections()) >= 4 and c, 60)
        assert all(c.get("ssl") for c in conns), conns
    finally:
        pool.stop()

    rogue = ssl.create_default_context(cafile=str(pki["ca.pem"]))
    rogue.load_cert_chain(str(pki["rogue.pem"]), str(pki["rogue.key"]))
    _refused(tls_node.url, rogue)
    _refused(tls_node.url, ssl.create_default_context(cafile=str(pki["ca.pem"])))  # no certificate
    # And a client that does not trust the broker's CA refuses the broker (verification is on).
    monkeypatch.setenv("GRIDBUS_TLS_CA_FILE", str(tls_node.base / "pki" / "rogue-ca.pem"))
    from gridbus.console import Session

    with pytest.raises(Exception):  # noqa: B017 - the console's own error for an unreachable broker
        Session(tls_node.url, timeout=5).call("collector@c", "Query", {}, timeout=5)
