"""The web console: one daemon that reads the pool's ads and events from the bus and serves its
pages, live, and Prometheus's /metrics on WEB_ADDRESS (HTCondor has gangliad read the collector;
MRG had cumin on the same management bus).

`python -m gridbus.console.web` runs it; the master runs it for ``WEB`` in DAEMON_LIST. It is a
client of the pool, so it lives here, above core: ``gridbus/`` never imports it. Modules:
`picture` (the ads and job events it holds), `metrics` (the Prometheus collector over them),
`users` (sign-in with broker credentials; calls made as the user), `server` (aiohttp: pages, JSON,
the server-sent event stream, /metrics), `agent` (the daemon on the bus).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gridbus.config import Config, knob
from gridbus.console.web.agent import WebDaemon, parse_address

__all__ = ["WebDaemon", "build", "main"]

knob("WEB_ADDRESS", "127.0.0.1:9680", "host:port the web console and /metrics listen on (port 0: any free port; "
     "the Web ad's WebURL and WEB_ADDRESS_FILE say which)")
knob("WEB_ADDRESS_FILE", "$(LOG)/.web_address", "where the web daemon writes the URL it serves on")
knob("WEB_NAME", "", "the web daemon's name (its address is web@<name>); empty: the host name")


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
    from gridbus.agent.runner import serve

    def make(cfg: Config, args: argparse.Namespace) -> WebDaemon:
        if args.log_dir:
            cfg.set("LOG", args.log_dir)  # (WEB_ADDRESS_FILE is under it)
        return build(cfg, args.name, args.url)

    serve("web", "WebLog", make, argv, check=lambda cfg: parse_address(str(cfg.get("WEB_ADDRESS"))))
