"""``python -m gridbus.agents.schedd``: run the schedd daemon (address ``schedd@<name>``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gridbus.agent.runner import base_parser, serve
from gridbus.agents.schedd.agent import Schedd
from gridbus.config import Config


def build(cfg: Config, args: argparse.Namespace) -> Schedd:
    overrides = {"spool": Path(args.spool)} if args.spool else {}
    return Schedd.from_config(cfg, name=args.name, url=args.url, **overrides)


def main(argv: list[str] | None = None) -> None:
    parser = base_parser("schedd")
    parser.add_argument("--spool", help="directory of the job queue (default: the SPOOL knob)")
    serve("schedd", "SchedLog", build, argv, parser=parser)


if __name__ == "__main__":
    main()
