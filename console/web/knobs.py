"""The web console's knobs, declared apart from its code so that `gridbus config` and htcondor2's
param find them without importing aiohttp."""

from __future__ import annotations

from gridbus.config import knob

knob("WEB_ADDRESS", "127.0.0.1:9680", "host:port the web console and /metrics listen on (port 0: any free port; "
     "the Web ad's WebURL and WEB_ADDRESS_FILE say which)")
knob("WEB_ADDRESS_FILE", "$(LOG)/.web_address", "where the web daemon writes the URL it serves on")
knob("WEB_NAME", "", "the web daemon's name (its address is web@<name>); empty: the host name")
