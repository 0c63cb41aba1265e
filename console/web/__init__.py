"""The web console: one daemon that reads the pool's ads and events from the bus and serves its
pages, live, and Prometheus's /metrics on WEB_ADDRESS (HTCondor has gangliad read the collector;
MRG had cumin on the same management bus).

`python -m gridbus.console.web` runs it (`main`); the master runs it for ``WEB`` in DAEMON_LIST. It is a
client of the pool, so it lives here, above core: ``gridbus/`` never imports it. Modules:
`picture` (the ads and job events it holds), `metrics` (the Prometheus collector over them),
`users` (sign-in with broker credentials; calls made as the user), `server` (aiohttp: pages, JSON,
the server-sent event stream, /metrics), `agent` (the daemon on the bus), `knobs` (its knobs).
"""

from __future__ import annotations

from gridbus.console.web import knobs  # noqa: F401 - declares WEB_ADDRESS, WEB_ADDRESS_FILE, WEB_NAME
