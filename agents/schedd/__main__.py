"""``python -m gridbus.agents.schedd``: run the schedd daemon (address ``schedd@<name>``)."""

from __future__ import annotations

from gridbus.agent.runner import base_parser, run, setup_logging
from gridbus.agents.schedd.agent import Schedd
from gridbus.config import Config


def main(argv: list[str] | None = None) -> None:
    parser = base_parser("schedd")
    parser.add_argument("--spool", help="directory of the job queue (default: the SPOOL knob)")
    args = parser.parse_args(argv)
    cfg = Config.load(daemon="schedd")
    log_dir = args.log_dir or str(cfg.path_of("LOG"))
    setup_logging("SchedLog", log_dir, args.foreground)
    overrides = {"spool": args.spool} if args.spool else {}

    def make() -> Schedd:
        from pathlib import Path

        if "spool" in overrides:
            overrides["spool"] = Path(overrides["spool"])
        return Schedd.from_config(cfg, name=args.name, url=args.url, **overrides)

    run(make)


if __name__ == "__main__":
    main()
