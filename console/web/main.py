"""The web daemon's start: its configuration read, the daemon built and run (`python -m
gridbus.console.web`, which the master runs for WEB in DAEMON_LIST)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gridbus.agent.runner import serve
from gridbus.config import Config
from gridbus.console.web import knobs  # noqa: F401 - declares WEB_ADDRESS, WEB_ADDRESS_FILE, WEB_NAME
from gridbus.console.web.agent import WebDaemon, parse_address

__all__ = ["build", "main"]


def build(cfg: Config, name: str | None = None, url: str | None = None) -> WebDaemon:
    address = str(cfg.get("WEB_ADDRESS"))
    parse_address(address)  # a bad address ends the start with a sentence
    address_file = str(cfg.get("WEB_ADDRESS_FILE") or "")
    daemon = WebDaemon(
        name or cfg.daemon_name("web"), url or cfg.url(), address=address,
        address_file=Path(address_file).expanduser().resolve() if address_file else None,
        update_interval=float(cfg.get("UPDATE_INTERVAL")),
        lifetime=float(cfg.get("CLASSAD_LIFETIME")) or None,
        admins=cfg.get("ALLOW_ADMINISTRATOR"),
    )
    daemon.config = cfg
    return daemon


def main(argv: list[str] | None = None) -> None:
    def make(cfg: Config, args: argparse.Namespace) -> WebDaemon:
        if args.log_dir:
            cfg.set("LOG", args.log_dir)  # (WEB_ADDRESS_FILE is under it)
        return build(cfg, args.name, args.url)

    serve("web", "WebLog", make, argv, check=lambda cfg: parse_address(str(cfg.get("WEB_ADDRESS"))))
