"""The master: runs the daemons of its host (DAEMON_LIST) as child processes, restarts the ones
that die with backoff, advertises a Master ad, and serves Start, Stop, Restart and Reconfig.

`python -m gridbus.agents.master` runs it. Modules: `children` (one daemon process: spawn, watch,
backoff, stop), `pidfile` (pid files under $(RUN)), `agent` (the Master agent and its methods).
"""

from __future__ import annotations

import sys

from gridbus.agents.master.agent import Master  # declares the master's knobs
from gridbus.config import Config

__all__ = ["Master", "build", "main"]


def build(cfg: Config, name: str | None = None, url: str | None = None, *, foreground: bool = False) -> Master:
    """A master configured from ``cfg`` (arguments given here win)."""
    return Master(cfg, name, url, foreground=foreground)


def main(argv: list[str] | None = None) -> None:
    from gridbus.agent.runner import base_parser, run, setup_logging
    from gridbus.agents.master.children import log_name

    parser = base_parser("master")
    parser.add_argument("--config", help="configuration file (default: GRIDBUS_CONFIG, ./gridbus.toml, ...)")
    args = parser.parse_args(argv)
    try:
        cfg = Config.load(args.config, daemon="master")
        log_dir = args.log_dir or str(cfg.path_of("LOG"))
        max_bytes, backups = int(cfg.get("MAX_DAEMON_LOG")), int(cfg.get("MAX_NUM_DAEMON_LOG"))
    except (ValueError, KeyError) as exc:
        sys.exit(f"gridbus master: bad configuration: {exc}")
    if args.log_dir:
        cfg.set("LOG", args.log_dir)
    setup_logging(log_name("MASTER"), log_dir, args.foreground, max_bytes=max_bytes, backups=backups)
    run(lambda: build(cfg, args.name, args.url, foreground=args.foreground))
