"""A trivial daemon kind for the master's tests: the framework's echoer, run as a process.

`python -m tests.integration.master.echo_daemon --name a` serves echoer@a, as the real daemons
run under the master: the runner's logging, SIGTERM and SIGHUP (reconfig) handling.
"""

from __future__ import annotations

from gridbus.agent.runner import base_parser, run, setup_logging
from gridbus.config import Config
from tests.integration.framework.echoer import Echoer


def main() -> None:
    args = base_parser("echoer").parse_args()
    cfg = Config.load(daemon="echoer")
    name = args.name or "echo"
    setup_logging(f"Echo{name.capitalize()}Log", args.log_dir, args.foreground)
    run(lambda: Echoer(name, args.url or cfg.url(), update_interval=float(cfg.get("UPDATE_INTERVAL"))))


if __name__ == "__main__":
    main()
