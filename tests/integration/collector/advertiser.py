"""A small agent that advertises ads it is told to, for the collector tests.

Runs in a thread (AgentThread) or as a real process:
``python -m tests.integration.collector.advertiser URL NAME INTERVAL LIFETIME`` (SIGTERM stops it
gracefully, SIGKILL does not).
"""

from __future__ import annotations

import sys
from typing import Any

from gridbus.agent import Agent


class Advertiser(Agent):
    kind = "advertiser"
    my_type = "Generic"

    def __init__(self, name: str, url: str, ads: list[dict[str, Any]] | None = None,
                 private: list[dict[str, Any]] | None = None, **kw: Any):
        super().__init__(name, url, **kw)
        self.extra_ads = list(ads or [])
        self.secret_ads = list(private or [])

    def ads(self) -> list[dict[str, Any]]:
        return [self.daemon_ad(), *self.extra_ads]

    def private_ads(self) -> list[dict[str, Any]]:
        return list(self.secret_ads)


def main(argv: list[str]) -> None:
    from gridbus.agent.runner import run, setup_logging

    url, name, interval, lifetime = argv[0], argv[1], float(argv[2]), float(argv[3])
    setup_logging("advertiser", None, True, "WARNING")
    run(lambda: Advertiser(name, url, update_interval=interval, lifetime=lifetime))


if __name__ == "__main__":
    main(sys.argv[1:])
