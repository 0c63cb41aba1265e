"""`python -m gridbus.agents.master.health <address>`: exit 0 if the agent answers on the bus.

The health check of the compose services (and of anything that supervises a daemon): it asks the
agent at ``<address>`` (e.g. ``schedd@pool``) for its objects, as a console would, and exits 1
with a sentence when no answer comes within the timeout.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gridbus-health", description=__doc__.splitlines()[0])
    parser.add_argument("address", help="the agent's address, <kind>@<name>")
    parser.add_argument("--url", help="broker URL (default: GRIDBUS_URL or the configuration)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer")
    args = parser.parse_args(argv)
    if "@" not in args.address:
        print(f"gridbus-health: {args.address!r} is not an agent address (<kind>@<name>)", file=sys.stderr)
        return 2
    from gridbus.config import Config
    from gridbus.console import Session

    try:
        with Session(args.url or Config.load().url(), timeout=args.timeout) as session:
            objects = session.getObjects(_agent=args.address, _timeout=args.timeout)
    except Exception as exc:  # an unreachable broker is as unhealthy as a silent agent
        print(f"gridbus-health: {args.address}: {exc}", file=sys.stderr)
        return 1
    if not objects:
        print(f"gridbus-health: {args.address} did not answer within {args.timeout} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
