"""The master: runs the daemons of its host (DAEMON_LIST) as child processes, restarts the ones
that die with backoff, advertises a Master ad, and serves Start, Stop, Restart, Reconfig and Off.

`python -m gridbus.agents.master` runs it. Modules: `children` (one daemon process: spawn, watch,
backoff, stop), `pidfile` (pid files under $(RUN)), `agent` (the Master agent and its methods).
"""

from __future__ import annotations

from gridbus.agents.master.agent import Master  # declares the master's knobs
from gridbus.config import Config

__all__ = ["Master", "build", "main"]


def build(cfg: Config, name: str | None = None, url: str | None = None, *, foreground: bool = False) -> Master:
    """A master configured from ``cfg`` (arguments given here win)."""
    return Master(cfg, name, url, foreground=foreground)


def main(argv: list[str] | None = None) -> None:
    import argparse

    from gridbus.agent.runner import base_parser, serve
    from gridbus.agents.master.children import log_name

    parser = base_parser("master")
    parser.add_argument("--config", help="configuration file (default: GRIDBUS_CONFIG, ./gridbus.toml, ...)")

    made: list[Master] = []

    def make(cfg: Config, args: argparse.Namespace) -> Master:
        if args.log_dir:
            cfg.set("LOG", args.log_dir)  # the master's daemons log beside it
        made.append(build(cfg, args.name, args.url, foreground=args.foreground))
        return made[0]

    serve("master", log_name("MASTER"), make, argv, parser=parser)
    if made and made[0].restart_self:  # Restart(Master=true): the same process, started afresh
        import os
        import sys

        os.execv(sys.executable, [sys.executable, "-m", "gridbus.agents.master",
                                  *(sys.argv[1:] if argv is None else argv)])
