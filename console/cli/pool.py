"""`gridbus pool up|status|down`, `gridbus broker setup` and `gridbus config`.

The personal pool is a master on this machine running the collector, negotiator, schedd and
startd (DAEMON_LIST). Its state lives under LOCAL_DIR (``./var`` in a checkout, else
``~/.local/share/gridbus``; ``GRIDBUS_LOCAL_DIR`` moves it): the pid files in ``$(RUN)``, the
logs in ``$(LOG)``, the job queue in ``$(SPOOL)``.

``--local-dir DIR`` makes a pool of that directory, independent of every other on the machine: its
LOCAL_DIR is DIR and it runs in a vhost of its own (gridbus.personal.open_own_pool), removed again
by ``gridbus pool down --local-dir DIR``. The console reaches it with ``GRIDBUS_LOCAL_DIR=DIR``.
Without it, pools share the URL's vhost and names: a second ``pool up`` from another directory
says where the first runs and how to reach it.

`register(subparsers)` adds the commands; each sets ``handler(args) -> exit status`` and reads
the broker URL from ``args.url`` (the `gridbus` command fills it in from --pool, GRIDBUS_URL or
the configuration file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gridbus.agents.master import pidfile
from gridbus.bus import BrokerURL
from gridbus.config import Config
from gridbus.console.cli import broker as broker_check
from gridbus.errors import EXIT_REASON_ENV
from gridbus.topology import DAEMON_NO_RESTART

MASTER_MODULE = "gridbus.agents.master"
# The daemon kinds whose knobs `gridbus config` shows (importing a module declares its knobs).
DAEMON_MODULES = ("master", "collector", "negotiator", "schedd", "startd")
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", socket.gethostname()}


def register(subparsers: Any) -> None:
    pool = subparsers.add_parser("pool", help="a personal pool on this machine: up, status, down",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = pool.add_subparsers(dest="pool_command", metavar="ACTION")
    actions.required = True
    up = actions.add_parser("up", help="start the personal pool (foreground unless --detach)")
    up.add_argument("--detach", "-d", action="store_true", help="run in the background and return once it serves")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds --detach waits for the daemons (default 90)")
    up.set_defaults(handler=cmd_up)
    status = actions.add_parser("status", help="is the personal pool up, and how are its daemons")
    status.set_defaults(handler=cmd_status)
    down = actions.add_parser("down", help="stop the personal pool; no process is left behind")
    down.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a graceful stop before killing")
    down.set_defaults(handler=cmd_down)
    for command in (up, status, down):
        command.add_argument("--local-dir", metavar="DIR",
                             help="the pool of this directory (its LOCAL_DIR), in a vhost of its own: "
                                  "independent of every other pool on this machine")

    broker = subparsers.add_parser("broker", help="set up the broker for a pool")
    bactions = broker.add_subparsers(dest="broker_command", metavar="ACTION")
    bactions.required = True
    setup = bactions.add_parser(
        "setup", help="create the vhost, daemon and user accounts and their permissions (idempotent)",
        description="Through RabbitMQ's management API, as the URL's user (an administrator): the "
        "vhost, the daemon account (full rights in the vhost), user accounts (call methods, read "
        "their own job events and public ads; never publish ads or read claim ids), the exchanges.",
    )
    setup.add_argument("--vhost", help="the pool's vhost (default: the URL's)")
    setup.add_argument("--daemon-user", default="gridbus", help="the daemons' broker account (default gridbus)")
    setup.add_argument("--daemon-password", help="its password (default: keep it, or make one up for a new account)")
    setup.add_argument("--user", action="append", default=[], metavar="NAME[:PASSWORD]",
                       help="a person's account (repeat for more); without a password a new account gets a made-up one")
    setup.set_defaults(handler=cmd_broker_setup)
    broker_check.register(bactions)

    config = subparsers.add_parser("config", aliases=["config_val"],
                                   help="print the effective configuration and where each value comes from (condor_config_val)")
    config.add_argument("names", nargs="*", help="only these knobs")
    config.add_argument("--daemon", help="as this daemon sees it (its [section] of the file applies)")
    config.add_argument("--json", action="store_true", help="one JSON object: name -> {value, source}")
    config.set_defaults(handler=cmd_config)


# ---------------------------------------------------------------------- the broker
def _answers(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


DEFAULT_NODE_PORT = 5672  # the AMQP port of the machine's default RabbitMQ node (rabbit@<host>)


def ensure_broker(url: str, wait: float = 90.0, say: Any = print) -> None:
    """Make sure a broker answers; start the machine's default RabbitMQ node when it is the one the
    URL names (one broker, on this machine, on the default node's port 5672) and it is installed
    but not running. A URL naming other brokers, another port or several brokers (a cluster, whose
    nodes are not the default node) never starts anything."""
    broker = BrokerURL(url)
    if any(_answers(b.host, b.port) for b in broker.alternatives):
        return
    if len(broker.alternatives) > 1 or broker.host not in LOCAL_HOSTS or broker.port != DEFAULT_NODE_PORT:
        raise RuntimeError(
            f"the broker at {broker.redacted()} does not answer; it is not this machine's default RabbitMQ "
            f"node (127.0.0.1:{DEFAULT_NODE_PORT}), so pool up starts none: start it, or point GRIDBUS_URL at "
            "one that runs")
    server = shutil.which("rabbitmq-server")
    if server is None:
        raise RuntimeError(
            f"no broker answers at {broker.redacted()} and RabbitMQ is not installed: install it "
            "(Debian/Ubuntu: sudo apt-get install rabbitmq-server; then rabbitmq-plugins enable "
            "rabbitmq_management), or run `make broker`, or point GRIDBUS_URL at a broker you have"
        )
    say(f"starting the local RabbitMQ ({server} -detached)")
    try:
        subprocess.run([server, "-detached"], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"could not start RabbitMQ ({server} -detached): {exc}; try `sudo rabbitmq-server -detached`") from exc
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if _answers(broker.host, broker.port):
            return
        time.sleep(0.5)
    raise RuntimeError(
        f"RabbitMQ was started but does not answer on {broker.host}:{broker.port} after {wait:.0f} s; "
        "see its log (/var/log/rabbitmq) or start it by hand (sudo rabbitmq-server -detached)"
    )


def check_broker(url: str, master: str) -> None:
    """Log in once, so a wrong password or missing vhost is said plainly before anything starts;
    and, on that connection, that no other pool of the same names serves on this vhost (another
    user's personal pool on this machine, or one started from another directory), whose daemons
    this pool's would refuse to share their addresses with, one by one."""
    import pika
    import pika.exceptions

    from gridbus import bus

    broker = BrokerURL(url)
    try:
        first = next((b for b in broker.alternatives if _answers(b.host, b.port)), broker)
        params = pika.URLParameters(first.url)
        params.socket_timeout = 5
        params.blocked_connection_timeout = 5
        conn = pika.BlockingConnection(params)
    except pika.exceptions.ProbableAuthenticationError as exc:
        raise RuntimeError(f"the broker refused the login of {broker.user!r} ({broker.redacted()}): check GRIDBUS_URL's user and password") from exc
    except pika.exceptions.ProbableAccessDeniedError as exc:
        raise RuntimeError(
            f"{broker.user!r} may not use vhost {broker.vhost!r}: create it and the accounts with `gridbus broker setup`"
        ) from exc
    except pika.exceptions.AMQPError as exc:
        raise RuntimeError(f"cannot log in to {broker.redacted()}: {exc!r}") from exc
    try:
        serving = conn.channel().queue_declare(bus.rpc_queue(master), passive=True).method.consumer_count
    except pika.exceptions.ChannelClosedByBroker as exc:
        if exc.reply_code != 404:  # (404: no such queue, so nobody serves that address)
            raise
        serving = 0
    finally:
        if conn.is_open:
            conn.close()
    if serving:
        where = _local_dir_of(url, master)
        raise RuntimeError(
            f"a personal pool already runs on {broker.redacted()} (master {master}"
            + (f", LOCAL_DIR {where}" if where else "") + "): the console reaches it as it is "
            "(gridbus q, gridbus status, htcondor2's Schedd()), and `gridbus pool down` "
            + (f"with GRIDBUS_LOCAL_DIR={where} " if where else "where it was started ")
            + "stops it; to run another pool beside it, independent of it, start that one with "
            "`gridbus pool up --local-dir DIR` (a vhost of its own)")


def _local_dir_of(url: str, master: str) -> str | None:
    """The LOCAL_DIR the master ``master`` advertises (its ad's LocalDir), or None."""
    from gridbus.console.collector import AdType, Collector

    name = master.partition("@")[2]
    try:
        ads = Collector(url).query(AdType.Master, constraint=f'Name == "{name}" || Name == "{master}"',
                                   projection=["LocalDir"])
    except Exception:  # no collector answers: the sentence does without
        return None
    return next((str(ad["LocalDir"]) for ad in ads if ad.get("LocalDir")), None)


def use_local_dir(args: argparse.Namespace) -> None:
    """``--local-dir DIR``: this command's LOCAL_DIR is DIR (the configuration's paths follow it)."""
    if getattr(args, "local_dir", None):
        os.environ["GRIDBUS_LOCAL_DIR"] = str(Path(args.local_dir).expanduser().resolve())


def pool_url_of(cfg: Config, url: str) -> str:
    """The URL of the pool of this LOCAL_DIR: its own vhost's when it has one, else ``url``."""
    from gridbus import personal

    return personal.own_pool_url(cfg.path_of("LOCAL_DIR")) or url


# ---------------------------------------------------------------------- the personal pool
def pool_config() -> Config:
    return Config.load(daemon="master")


def master_pid(cfg: Config) -> int | None:
    return pidfile.live_pid(cfg.path_of("RUN") / "master.pid", MASTER_MODULE)


def master_command(cfg: Config, foreground: bool) -> list[str]:
    cmd = [sys.executable, "-m", MASTER_MODULE]
    if cfg.path is not None:
        cmd += ["--config", str(cfg.path)]
    if foreground:
        cmd.append("--foreground")
    return cmd


def master_record(url: str, pid: int, timeout: float = 5.0) -> dict[str, Any] | None:
    """The master object (properties) of the master process ``pid``, or None if it does not answer."""
    from gridbus.console import Session

    with Session(url, timeout=timeout) as session:
        for obj in session.getObjects(_class="master", _timeout=timeout):
            props = dict(obj.getProperties())
            if props.get("MasterPid") == pid:
                return props
    return None


def _daemons_serving(url: str, record: dict[str, Any]) -> bool:
    """Every daemon of the master is alive and the standard ones answer on the bus."""
    daemons = record.get("Daemons") or []
    if not all(d.get("State") == "Alive" for d in daemons):
        return False
    from gridbus.console import Session

    kinds = {str(d["Name"]).lower() for d in daemons} & set(DAEMON_MODULES)
    with Session(url, timeout=5) as session:
        serving = {a.kind for a in session.getAgents()}
    return kinds <= serving


def stopped_for_good(record: dict[str, Any] | None) -> list[str]:
    """One sentence per daemon of the master's ``record`` that exited with DAEMON_NO_RESTART (the
    master does not start it again): its name, the status and the sentence it stopped with."""
    lines = []
    for d in (record or {}).get("Daemons") or []:
        if d.get("State") == "Stopped" and d.get("LastExitCode") == DAEMON_NO_RESTART:
            reason = str(d.get("LastExitReason") or "") or "its log says why"
            lines.append(f"{d.get('Name')} exited with status {DAEMON_NO_RESTART} (DAEMON_NO_RESTART) and is not "
                         f"restarted: {reason}")
    return lines


def unprivileged_account(cfg: Config) -> str | None:
    """The account a personal pool started by root runs jobs as, when the configuration says none.

    HTCondor runs a job as its owner's account; a personal pool started by root has no account for
    its submitter to run as (and never runs jobs as root), so its jobs run as ``nobody``, as
    HTCondor's nobody slot users do, unless STARTER_UNPRIVILEGED_USER or STARTER_ALLOW_ROOT_JOBS
    says otherwise. None when the pool is not root's or is configured."""
    if os.geteuid() != 0 or str(cfg.get("STARTER_UNPRIVILEGED_USER", "") or ""):
        return None
    if str(cfg.get("STARTER_ALLOW_ROOT_JOBS", False)).lower() in ("true", "1", "yes"):
        return None
    return "nobody"


def cmd_up(args: argparse.Namespace) -> int:
    from gridbus import personal

    use_local_dir(args)
    cfg = pool_config()
    url = args.url
    running = master_pid(cfg)
    if running is not None:
        print(f"the personal pool already runs (master pid {running}); `gridbus pool status` shows it")
        return 0
    ensure_broker(url)
    if getattr(args, "local_dir", None):
        url = personal.open_own_pool(url, cfg.path_of("LOCAL_DIR"))
        print(f"gridbus: the pool of {cfg.path_of('LOCAL_DIR')} runs in a vhost of its own, "
              f"{BrokerURL(url).vhost}; reach it with GRIDBUS_LOCAL_DIR={cfg.path_of('LOCAL_DIR')}", flush=True)
    check_broker(url, f"master@{cfg.daemon_name('master')}")
    me = personal.ensure(url, cfg.path_of("LOCAL_DIR"))
    if me is not None:
        print(f"gridbus: your jobs are owned by {me}: the console logs in to this pool as the broker account "
              f"{me}, named after you", flush=True)
    log_dir = cfg.path_of("LOG")
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GRIDBUS_URL": url}
    runas = unprivileged_account(cfg)
    if runas is not None:
        env["GRIDBUS_STARTER_UNPRIVILEGED_USER"] = runas
        print(f"gridbus: started by root, this personal pool runs jobs as {runas}, never as root "
              "(set STARTER_UNPRIVILEGED_USER to choose the account, or STARTER_ALLOW_ROOT_JOBS)", flush=True)
    daemons = ", ".join(d for d in cfg.get("DAEMON_LIST") if d.upper() != "MASTER")
    if not args.detach:
        print(f"gridbus: personal pool ({daemons}) on {BrokerURL(url).redacted()}; logs in {log_dir}; Ctrl-C stops it",
              flush=True)
        # exec: the master becomes this process, so Ctrl-C reaches it and it stops the daemons in order.
        os.execve(sys.executable, master_command(cfg, foreground=True), env)
    out = open(log_dir / "MasterLog.out", "ab")  # noqa: SIM115 - handed to the detached master
    master_reason = cfg.path_of("RUN") / "master.exit-reason"  # the master stops for good with a sentence too
    master_reason.unlink(missing_ok=True)
    try:
        proc = subprocess.Popen(master_command(cfg, foreground=False), env={**env, EXIT_REASON_ENV: str(master_reason)},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    finally:
        out.close()
    deadline = time.monotonic() + args.timeout
    record: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if proc.returncode == DAEMON_NO_RESTART and master_reason.is_file():
                print(f"gridbus pool: the master exited with status {DAEMON_NO_RESTART} (DAEMON_NO_RESTART): "
                      f"{master_reason.read_text(errors='replace').strip()}", file=sys.stderr)
                return DAEMON_NO_RESTART
            raise RuntimeError(f"the master exited with status {proc.returncode}; see {log_dir / 'MasterLog'} and {log_dir / 'MasterLog.out'}")
        serving = False
        try:
            record = master_record(url, proc.pid, timeout=2)
            serving = bool(record) and _daemons_serving(url, record or {})
        except Exception:  # the master is still starting
            pass
        if serving:
            print(f"gridbus: personal pool up (master pid {proc.pid}): {daemons}; logs in {log_dir}")
            return 0
        stopped = stopped_for_good(record)
        if stopped:
            # Waiting on would only reach the timeout: the master does not start such a daemon again.
            for line in stopped:
                print(f"gridbus pool: {line}", file=sys.stderr)
            print(f"gridbus pool: the other daemons run (master pid {proc.pid}); `gridbus pool down` stops them",
                  file=sys.stderr)
            return DAEMON_NO_RESTART
        time.sleep(0.5)
    states = ", ".join(f"{d['Name']} {d['State']}" for d in (record or {}).get("Daemons", [])) or "no answer from the master"
    raise RuntimeError(f"the pool is not up after {args.timeout:.0f} s ({states}); see the logs in {log_dir}, "
                       "and `gridbus pool down` to stop what started")


def cmd_status(args: argparse.Namespace) -> int:
    use_local_dir(args)
    cfg = pool_config()
    args.url = pool_url_of(cfg, args.url)
    pid = master_pid(cfg)
    if pid is None:
        print(f"no personal pool runs here (LOCAL_DIR {cfg.path_of('LOCAL_DIR')}); start one with `gridbus pool up`")
        return 1
    print(f"master pid {pid}, LOCAL_DIR {cfg.path_of('LOCAL_DIR')}, broker {BrokerURL(args.url).redacted()}")
    try:
        record = master_record(args.url, pid)
    except Exception as exc:
        print(f"the master does not answer on the broker: {exc}")
        return 1
    if record is None:
        print("the master runs but does not answer on this broker (another GRIDBUS_URL?)")
        return 1
    now = time.time()
    print(f"{'DAEMON':<12} {'STATE':<9} {'PID':>8} {'RESTARTS':>8}  UP")
    for d in record.get("Daemons", []):
        up = _duration(now - d["StartTime"]) if d.get("State") == "Alive" and d.get("StartTime") else "-"
        print(f"{d['Name']:<12} {d['State']:<9} {d.get('Pid') or '-':>8} {d.get('Restarts', 0):>8}  {up}")
    for line in stopped_for_good(record):  # why a daemon stays down, where it said
        print(line)
    connections = _pool_connections(args.url)
    if connections is not None:
        print(f"broker connections of the pool: {len(connections)} ({', '.join(sorted(connections))})")
    return 0


def _pool_connections(url: str) -> list[str] | None:
    from gridbus.mgmt import Management

    broker = BrokerURL(url)
    try:
        conns = Management.for_broker(broker).connections(broker.vhost)
    except Exception:  # the management API is optional for status
        return None
    names = [str((c.get("client_properties") or {}).get("connection_name", "")) for c in conns]
    return [n.removeprefix("gridbus ") for n in names if n.startswith("gridbus ")]


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def cmd_down(args: argparse.Namespace) -> int:
    from gridbus import personal

    use_local_dir(args)
    cfg = pool_config()
    run_dir = cfg.path_of("RUN")
    # The daemons' pids are read before the master goes, as the master removes their pid files.
    daemon_pids = {p.stem: pid for p in run_dir.glob("*.pid") if p.stem != "master" and (pid := pidfile.read(p))}
    pid = master_pid(cfg)
    if pid is not None:
        print(f"stopping the personal pool (master pid {pid})")
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone([pid], args.timeout):
            # The daemons still up are the ones whose stop held the master's up; their logs say
            # where it waited (a stop past 10 s is logged with its step and its tasks' awaits).
            late = ", ".join(f"{name.upper()} (pid {p})" for name, p in daemon_pids.items() if pidfile.alive(p))
            print(f"the master did not stop within {args.timeout:.0f} s (still running: {late or 'none of its daemons'}); "
                  f"killing it and its daemons; their logs are in {cfg.path_of('LOG')}")
            _kill(pid)
    leftovers = [p for p in daemon_pids.values() if pidfile.alive(p)]
    if leftovers:
        # Only if the master was gone or hung: its daemons are ended here, with their sessions.
        for p in leftovers:
            _signal_group(p, signal.SIGTERM)
        if not _wait_gone(leftovers, 10):
            for p in leftovers:
                _kill(p)
    for p in daemon_pids.values():
        _signal_group(p, signal.SIGKILL)  # whatever a daemon left in its session
    for path in [*run_dir.glob("*.pid")]:
        pidfile.remove(path)
    # A process SIGKILL ends is gone a moment later, not at once (a daemon of a large heap takes a
    # while to free it): it is waited for before anything counts as still running.
    named = {**({pid: "master"} if pid else {}), **{p: name for name, p in daemon_pids.items()}}
    _wait_gone(list(named), KILLED_GONE_WAIT)
    remaining = [f"{p} ({name})" for p, name in named.items() if pidfile.alive(p)]
    if remaining:
        raise RuntimeError(f"processes {', '.join(remaining)} are still running; end them by hand (kill -9)")
    vhost = personal.close_own_pool(cfg.path_of("LOCAL_DIR"))
    if vhost is not None:
        print(f"the pool's vhost {vhost} is removed")
    print("the personal pool is down" if pid or daemon_pids else "no personal pool runs here")
    return 0


# Seconds a process SIGKILL was sent to may take to be gone.
KILLED_GONE_WAIT = 10.0


def _wait_gone(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pidfile.alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return not any(pidfile.alive(p) for p in pids)


def _signal_group(pid: int, sig: int) -> None:
    # A daemon runs in a session of its own (pgid = its pid); processes it left there go too.
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int) -> None:
    _signal_group(pid, signal.SIGKILL)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------- broker setup
def cmd_broker_setup(args: argparse.Namespace) -> int:
    from gridbus import accounts
    from gridbus.mgmt import Management

    broker = BrokerURL(args.url)
    vhost = args.vhost or broker.vhost
    users: dict[str, str | None] = {}
    for spec in args.user:
        name, sep, password = spec.partition(":")
        if not name:
            raise ValueError(f"--user {spec!r}: give NAME or NAME:PASSWORD")
        users[name] = password if sep else None
    report = accounts.setup(Management.for_broker(broker), vhost, args.daemon_user, args.daemon_password, users,
                            quorum=broker.is_cluster)
    for line in report.lines:
        print(line)
    for user in users:
        print(f"{user}: jobs run as the Unix account {user} on execute nodes (USER_MAP maps it to another)")
    for user, password in report.passwords.items():
        print(f"password of the new account {user}: {password}  (shown once; keep it)")
    daemon_url = broker.with_vhost(vhost).with_credentials(
        args.daemon_user, args.daemon_password or report.passwords.get(args.daemon_user, "<its password>"))
    print(f'daemons: GRIDBUS_URL = "{daemon_url.url}"')
    return 0


# ---------------------------------------------------------------------- config
def cmd_config(args: argparse.Namespace) -> int:
    from gridbus.console.configuration import declare_daemon_knobs

    declare_daemon_knobs()
    cfg = Config.load(daemon=args.daemon)
    wanted = {n.upper() for n in args.names}
    rows = [row for row in cfg.items() if not wanted or row[0] in wanted]
    missing = wanted - {row[0] for row in rows}
    if args.command == "config_val" and wanted and not args.json:
        # condor_config_val NAME...: each value alone on its line; "Not defined: NAME" for the rest.
        values = {name: value for name, value, _ in rows}
        for name in (n.upper() for n in args.names):
            if name in values:
                value = values[name]
                if isinstance(value, float) and value.is_integer():
                    value = int(value)  # (a knob read as a number: 60, as it is written)
                print(", ".join(map(str, value)) if isinstance(value, list) else value)
            else:
                print(f"Not defined: {name}", file=sys.stderr)
        return 1 if missing else 0
    if missing:
        raise KeyError(f"no knob {', '.join(sorted(missing))}: not declared, not in {cfg.path or 'any file'}, not in the environment")
    if args.json:
        print(json.dumps({name: {"value": value, "source": source} for name, value, source in rows}, indent=2, default=str))
        return 0
    print(f"# configuration file: {cfg.path or 'none (' + ', '.join(map(str, _search())) + ' not found)'}")
    for name, value, source in rows:
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        print(f"{name} = {shown}  # {source}")
    return 0


def _search() -> list[Path]:
    from gridbus.config import search_path

    return search_path()
