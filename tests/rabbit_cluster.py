"""A RabbitMQ cluster of three nodes on this machine, for the cluster tests, the cluster bench and
``make cluster``.

Each node has a name (``gbc1@localhost``...), ports (AMQP, management, Erlang distribution) and
data, log and configuration files of its own under one directory, and the nodes share an Erlang
cookie kept in that directory (HOME points there for the server and the CLI), so the machine's own
node (rabbit@localhost, 5672/15672/25672) is never touched: not its cookie, not its ports, not its
files. Everything listens on loopback only.

    python -m tests.rabbit_cluster start [DIR]   # prints GRIDBUS_URL for the three nodes
    python -m tests.rabbit_cluster stop [DIR]

A node is taken down two ways: `Node.kill` (kill -9 of its Erlang VM, a crash; `Node.start` boots a
new VM) and `Node.stop_app` (`rabbitmqctl stop_app`: RabbitMQ stops, its VM stays; `Node.start_app`
starts it again in a few seconds, without booting a VM, which on a loaded machine takes far longer).
A booting node waits for its peers' tables (`mnesia_table_loading_retry_timeout` x `_limit`) and
gives up when none answers: the node that went down last must come back first, or with the others.
`RabbitCluster.heal` brings every node back that way (all at once) and waits, by conditions, until
each serves and the cluster lists all of them running; where that fails it builds the cluster anew,
so no test inherits a broken one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

SBIN = Path(os.environ.get("RABBITMQ_SBIN", "/usr/lib/rabbitmq/bin"))
SERVER = SBIN / "rabbitmq-server"
CTL = SBIN / "rabbitmqctl"
# Ports: node i (1-based) gets AMQP BASE+i, management MGMT_BASE+i, distribution DIST_BASE+i, all
# away from the default node's 5672, 15672 and 25672 (its distribution port).
AMQP_BASE = int(os.environ.get("GRIDBUS_CLUSTER_PORT_BASE", "5780"))
COOKIE = "GRIDBUSTESTCLUSTERCOOKIE"
DEFAULT_DIR = Path(os.environ.get("GRIDBUS_CLUSTER_DIR", "/tmp/gridbus-cluster"))
# The nodes' names (<prefix><i>@localhost): another prefix (and GRIDBUS_CLUSTER_PORT_BASE) keeps two
# clusters on one machine apart; each takes the other's nodes for strays otherwise.
DEFAULT_PREFIX = os.environ.get("GRIDBUS_CLUSTER_PREFIX", "gbc")


class ClusterUnavailable(RuntimeError):
    """RabbitMQ's server scripts are missing or a node would not start."""


# How long a node may take to serve: a boot on two cpus shared with a CI run and several test
# sessions has taken over a minute (a start_app takes seconds). A bound, not a sleep: every wait
# ends as soon as its condition holds, and a VM that died while booting ends it at once.
BOOT_TIMEOUT = float(os.environ.get("GRIDBUS_CLUSTER_BOOT_TIMEOUT", "180"))


def missing() -> str | None:
    """Why a cluster cannot be made here, or None."""
    for script in (SERVER, CTL):
        if not os.access(script, os.X_OK):
            return (f"RabbitMQ's server script {script} is missing (install rabbitmq-server, or set "
                    "RABBITMQ_SBIN to the directory holding rabbitmq-server and rabbitmqctl)")
    return None


@dataclass
class Node:
    index: int
    base: Path
    prefix: str
    down_at: float | None = field(default=None, compare=False)  # when a test took it down (monotonic)

    @property
    def name(self) -> str:
        return f"{self.prefix}{self.index}@localhost"

    @property
    def amqp_port(self) -> int:
        return AMQP_BASE + self.index

    @property
    def mgmt_port(self) -> int:
        return AMQP_BASE + 10_000 + self.index

    @property
    def dist_port(self) -> int:
        return AMQP_BASE + 20_000 + self.index

    @property
    def dir(self) -> Path:
        return self.base / f"node{self.index}"

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    @property
    def mgmt_url(self) -> str:
        return f"http://127.0.0.1:{self.mgmt_port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update({
            "HOME": str(self.base),  # the shared cookie lives here, not in the default node's home
            "RABBITMQ_CONF_ENV_FILE": str(self.dir / "rabbitmq-env.conf"),  # not /etc's NODENAME
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_CONFIG_FILE": str(self.dir / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(self.dir / "pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            # The distribution listener on loopback too (it listens on every interface otherwise).
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        })
        return env

    def write_files(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "rabbitmq-env.conf").write_text("")
        (self.dir / "enabled_plugins").write_text("[rabbitmq_management].\n")
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.amqp_port}\n"
            f"management.tcp.ip = 127.0.0.1\n"
            f"management.tcp.port = {self.mgmt_port}\n"
            "loopback_users = none\n"
            # A killed node comes back and waits for its peers' tables a little, not 5 minutes.
            "mnesia_table_loading_retry_timeout = 10000\n"
            "mnesia_table_loading_retry_limit = 3\n"
        )

    def ctl(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        proc = subprocess.run([str(CTL), "-n", self.name, *args], env=self.env(), capture_output=True,
                              text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterUnavailable(f"rabbitmqctl -n {self.name} {' '.join(args)}: {proc.stderr.strip()[-500:]}")
        return proc.stdout

    def pid(self) -> int | None:
        try:
            return int((self.dir / "pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def running(self) -> bool:
        pid = self.pid()
        return pid is not None and _alive(pid)

    def start(self, timeout: float = BOOT_TIMEOUT) -> None:
        """Boot the node's VM detached; return once it serves AMQP and its management API."""
        self.write_files()
        # The VM killed last time must be gone from epmd, or the new one could not take the name.
        _until(lambda: self.short_name not in _epmd_names(), 20, f"epmd forgetting {self.name}")
        # A stale pid file would pass for the new VM's (or for one that died booting): the new VM
        # writes its own early in its boot.
        (self.dir / "pid").unlink(missing_ok=True)
        subprocess.run([str(SERVER), "-detached"], env=self.env(), cwd=str(self.dir), check=True,
                       capture_output=True, timeout=60)
        self.wait_serving(timeout)
        self.down_at = None

    def serving(self) -> bool:
        # Our own VM (its pid file) must be up: a port answered by a node some earlier run left
        # behind under the same name would pass for this one.
        return self.running() and _answers(self.amqp_port) and _http_ok(self.mgmt_url)

    def wait_serving(self, timeout: float = BOOT_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.serving():
                return
            if self.pid() is not None and not self.running():  # its VM wrote its pid, then died
                raise ClusterUnavailable(f"{self.name} died while starting: {self.log_tail()}")
            time.sleep(0.3)
        raise ClusterUnavailable(f"{self.name} did not serve on {self.amqp_port} within {timeout:g} s: "
                                 f"{self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the node's log, for a sentence saying why it did not start."""
        try:
            text = (self.dir / "log" / f"{self.name}.log").read_text(errors="replace")
        except OSError:
            return f"no log in {self.dir / 'log'}"
        return " | ".join(line.strip()[:300] for line in text.splitlines()[-lines:])

    def kill(self) -> None:
        """kill -9 the node's Erlang VM (a crash), and wait until it is gone and its port is free."""
        pid = self.pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.down_at = time.monotonic()
        _until(lambda: not self.running(), 20, f"{self.name}'s VM gone")  # (its sockets close with it)

    def stop_app(self) -> None:
        """Stop RabbitMQ on the node and keep its VM (rabbitmqctl stop_app): down for its peers and
        clients, and back in seconds with `start_app`."""
        self.ctl("stop_app", timeout=BOOT_TIMEOUT)
        self.down_at = time.monotonic()
        _until(lambda: not _answers(self.amqp_port), 20, f"{self.name}'s AMQP listener closed")

    def start_app(self, timeout: float = BOOT_TIMEOUT) -> None:
        """Start RabbitMQ again in the node's running VM; return once it serves."""
        self.ctl("start_app", timeout=timeout)
        self.wait_serving(timeout)
        self.down_at = None

    def bring_back(self) -> None:
        """Start the node the way it went down: its app where its VM runs, else a new VM."""
        if self.serving():
            self.down_at = None
        elif self.running():
            self.start_app()
        else:
            self.start()

    def running_members(self) -> set[str]:
        """The nodes this node's cluster lists as running (empty where it does not answer)."""
        try:
            out = self.ctl("cluster_status", "--formatter", "json", timeout=60)
            return set(json.loads(out).get("running_nodes") or [])
        except (ClusterUnavailable, subprocess.TimeoutExpired, ValueError):
            return set()

    @property
    def short_name(self) -> str:
        return self.name.partition("@")[0]

    def stop(self) -> None:
        """A graceful stop (rabbitmqctl stop), falling back to kill."""
        if not self.running():
            return
        try:
            self.ctl("stop", timeout=30)
        except (ClusterUnavailable, subprocess.TimeoutExpired):
            self.kill()


class RabbitCluster:
    def __init__(self, base: Path | str = DEFAULT_DIR, size: int = 3, prefix: str = DEFAULT_PREFIX):
        self.base = Path(base)
        self.nodes = [Node(i, self.base, prefix) for i in range(1, size + 1)]

    @property
    def url(self) -> str:
        """GRIDBUS_URL for the whole cluster: the nodes' URLs, comma-separated."""
        return ",".join(n.url for n in self.nodes)

    def start(self) -> RabbitCluster:
        reason = missing()
        if reason:
            raise ClusterUnavailable(reason)
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)
        self.base.mkdir(parents=True)
        cookie = self.base / ".erlang.cookie"
        cookie.write_text(COOKIE)
        cookie.chmod(0o400)
        with ThreadPoolExecutor(len(self.nodes)) as pool:  # the boots overlap
            list(pool.map(Node.start, self.nodes))
        first = self.nodes[0]
        for node in self.nodes[1:]:
            node.ctl("stop_app")
            node.ctl("join_cluster", first.name)
            node.ctl("start_app")
        for node in self.nodes:
            node.wait_serving()
        return self

    def members(self) -> str:
        return self.nodes[0].ctl("cluster_status")

    def whole(self) -> bool:
        """Every node serves and the cluster lists all of them running."""
        names = {n.name for n in self.nodes}
        return all(n.serving() for n in self.nodes) and self.nodes[0].running_members() == names

    def heal(self, timeout: float = BOOT_TIMEOUT) -> str:
        """Make the cluster whole again, whatever a test left: every node that is down brought back
        (all at once, so the one that went down last is among them and none waits for it), then a
        wait until the cluster lists every node running; where that fails, the cluster is built
        anew (same names and ports, so its URL does not change). What was done, in a few words."""
        if self.whole():
            return "whole"
        down = [n for n in self.nodes if not n.serving()]
        try:
            with ThreadPoolExecutor(max(1, len(down))) as pool:
                list(pool.map(Node.bring_back, down))
            _until(self.whole, timeout, "the cluster listing every node running")
            return f"brought back {', '.join(n.name for n in down) or 'nothing'}"
        except (ClusterUnavailable, subprocess.SubprocessError, AssertionError) as exc:
            why = str(exc)
        self.start()
        return f"built anew ({why[:300]})"

    def supports_quorum(self) -> bool:
        out = self.nodes[0].ctl("list_feature_flags", "name", "state")
        return any(line.split()[:2] == ["quorum_queue", "enabled"] for line in out.splitlines())

    def stop(self) -> None:
        for node in self.nodes:
            if node.running():
                node.kill()  # a test cluster keeps nothing worth a graceful stop
        # Nodes of the same names that an earlier run left behind (a test session killed before its
        # teardown, a cluster made under another directory) hold the ports and the names, and may
        # run on a data directory since deleted: a new cluster would talk to them instead.
        strays = stray_pids({n.name for n in self.nodes})
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        while strays and any(_answers(n.amqp_port) for n in self.nodes) and time.monotonic() < deadline:
            time.sleep(0.1)

    def __enter__(self) -> RabbitCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stray_pids(names: set[str]) -> list[int]:
    """The Erlang VMs running a RabbitMQ node named in ``names``, by the RABBITMQ_NODENAME in their
    environment (so the machine's own node, rabbit@localhost, is never among them)."""
    wanted = {f"RABBITMQ_NODENAME={name}".encode() for name in names}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "cmdline").read_bytes().split(b"\0", 1)[0].endswith(b"beam.smp"):
                continue
            if wanted & set((entry / "environ").read_bytes().split(b"\0")):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _until(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Return once ``condition()`` is true; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    """The process runs: it exists and is not a zombie. A killed node's VM was detached (its parent
    is pid 1), and a pid 1 that does not reap (a container's) leaves it a zombie for good, which
    os.kill(pid, 0) still finds: such a node passed for running and was never started again."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _epmd_names() -> set[str]:
    """The node names epmd (the one on loopback the nodes use) has registered."""
    try:
        out = subprocess.run(["epmd", "-names"], env={**os.environ, "ERL_EPMD_ADDRESS": "127.0.0.1"},
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return set()
    return {line.split()[1] for line in out.splitlines() if line.startswith("name ") and len(line.split()) > 1}


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/api/overview", timeout=2):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code == 401  # the API answers; it wants credentials
    except OSError:
        return False


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in ("start", "stop"):
        print("usage: python -m tests.rabbit_cluster start|stop [DIR]", file=sys.stderr)
        return 2
    cluster = RabbitCluster(argv[2] if len(argv) > 2 else DEFAULT_DIR)
    if argv[1] == "stop":
        cluster.stop()
        print(f"stopped the cluster under {cluster.base}")
        return 0
    try:
        cluster.start()
    except ClusterUnavailable as exc:
        print(f"gridbus: {exc}", file=sys.stderr)
        return 1
    print(f"3-node RabbitMQ cluster under {cluster.base}; management on "
          + ", ".join(n.mgmt_url for n in cluster.nodes))
    print(f"export GRIDBUS_URL={cluster.url}")
    print(f"stop it with: make cluster-stop (or python -m tests.rabbit_cluster stop {cluster.base})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
