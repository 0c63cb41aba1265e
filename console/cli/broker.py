"""`gridbus broker check [--fix]`: every gridbus exchange and queue of the pool's vhost against
what this version declares.

Each is listed with its declaration, what differs from this version's, and what ``--fix`` does
about it (without ``--fix`` nothing changes: a dry run). The judgement is the daemons' own
(`gridbus.topology`); so is the fix (`gridbus.agent.reconcile.migrate`: a new queue, every message
moved with confirms, then the switch). A queue that something consumes is not migrated: stop the
pool's daemons first. An exchange of the wrong type is declared again (an exchange holds no
message; the daemons bind their queues again when they restart).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

import aiormq

from gridbus import bus, topology
from gridbus.agent import reconcile
from gridbus.bus import BrokerURL
from gridbus.mgmt import Management
from gridbus.topology import Consumers, Found, QueueSpec

SCHEDD_QUEUE_PREFIX = bus.rpc_queue("schedd@")


def register(actions: Any) -> None:
    """Add `check` beside `broker setup`."""
    check = actions.add_parser(
        "check", help="compare the vhost's gridbus exchanges and queues with what this version declares",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("--vhost", help="the pool's vhost (default: the URL's)")
    check.add_argument("--queue-type", choices=("auto", "classic", "quorum"), default="auto",
                       help="the pool's SCHEDD_REQUEST_QUEUE_TYPE (default auto: quorum when the URL lists "
                            "several brokers)")
    check.add_argument("--fix", action="store_true",
                       help="make every exchange and queue as this version declares it (default: say what it would do)")
    check.set_defaults(handler=cmd_broker_check)


def wanted_queue(name: str, *, cluster: bool, queue_type: str, found_age: Any = "24h") -> QueueSpec | None:
    """What this version declares as ``name`` (bindings aside), None for a queue it does not declare."""
    if name == bus.DEAD:
        return topology.dead_queue_spec(quorum=cluster)
    if name == bus.EVENT_STREAM:  # the schedd's JOB_EVENT_STREAM_MAX_AGE: a stream's age is its own
        return QueueSpec(name, True, {"x-queue-type": "stream", "x-max-age": found_age}, ((bus.EVENTS, bus.EVENT_STREAM_KEY),))
    if name.startswith(SCHEDD_QUEUE_PREFIX):
        quorum = queue_type == "quorum" or (queue_type == "auto" and cluster)
        return QueueSpec(name, True, topology.request_queue_arguments(durable=True, quorum=quorum))
    if name.startswith(bus.RPC + "."):
        return QueueSpec(name, False, topology.request_queue_arguments(durable=False, quorum=False))
    return None


def found_of(queue: dict[str, Any]) -> Found:
    """A queue as the management API lists it."""
    args = dict(queue.get("arguments") or {})
    if queue.get("type", "classic") != "classic":
        args["x-queue-type"] = queue["type"]
    return Found(bool(queue.get("durable")), args, int(queue.get("messages") or 0), int(queue.get("consumers") or 0))


def plan(mgmt: Management, vhost: str, *, cluster: bool, queue_type: str) -> list[dict[str, Any]]:
    """One row per gridbus exchange and queue: kind, name, found, wanted, differences, action
    ("" when nothing is to do), and what to fix with."""
    rows: list[dict[str, Any]] = []
    have = {x["name"]: x for x in mgmt.exchanges(vhost)}
    for name, kind in bus.EXCHANGES:
        x = have.get(name)
        wanted = f"durable {kind}"
        if x is None:
            rows.append(_row("exchange", name, "absent", wanted, ["absent"], "declare it"))
            continue
        kind = f"{'durable' if x.get('durable') else 'transient'} {x.get('type')}"
        diffs = [] if kind == wanted else [f"{wanted} wanted, {kind} found"]
        rows.append(_row("exchange", name, kind, wanted, diffs, "declare it again" if diffs else ""))
    for q in sorted(mgmt.queues(vhost), key=lambda q: q["name"]):
        name = q["name"]
        if not name.startswith("gridbus."):
            continue
        found = found_of(q)
        shown = topology.describe(found.durable, found.arguments)
        if name.endswith(topology.MIGRATING_SUFFIX):
            rows.append(_row("queue", name, shown, "absent", ["a migration cut short"], "finish the migration",
                             state=found))
            continue
        spec = wanted_queue(name, cluster=cluster, queue_type=queue_type,
                            found_age=found.arguments.get("x-max-age", "24h"))
        if q.get("exclusive") or spec is None:
            rows.append(_row("queue", name, shown, "(a running daemon's own)", [], ""))
            continue
        wanted = topology.describe(spec.durable, spec.arguments)
        diffs = topology.differences(spec, found)
        action = ""
        if diffs:
            action = (f"declare it anew, moving its {found.messages} message(s)" if not found.consumers else
                      f"none while {found.consumers} consumer(s) use it: stop them first (the pool's daemons, "
                      "and any other reader)")
        rows.append(_row("queue", name, shown, wanted, diffs, action, spec=spec, state=found))
    return rows


def _row(kind: str, name: str, found: str, wanted: str, diffs: list[str], action: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "name": name, "found": found, "wanted": wanted, "differences": diffs, "action": action, **extra}


def cmd_broker_check(args: argparse.Namespace) -> int:
    broker = BrokerURL(args.url)
    vhost = args.vhost or broker.vhost
    mgmt = Management.for_broker(broker)
    rows = plan(mgmt, vhost, cluster=broker.is_cluster, queue_type=args.queue_type)
    for row in rows:
        print(f"{row['kind']} {row['name']}: {row['found']}")
        if row["differences"]:
            print(f"  this version: {row['wanted']}")
            print(f"  differs: {'; '.join(row['differences'])}")
            print(f"  {'fixing' if args.fix else '--fix would'}: {row['action']}")
    todo = [r for r in rows if r["action"] and not r["action"].startswith("none")]
    stuck = [r for r in rows if r["action"].startswith("none")]
    if not args.fix:
        print(f"{len(todo)} to fix, {len(stuck)} in use" if todo or stuck else
              f"vhost {vhost}: every gridbus exchange and queue is as this version declares it")
        return 1 if todo or stuck else 0
    for row in todo:
        if row["kind"] == "exchange":
            _fix_exchange(mgmt, vhost, row["name"])
        else:
            asyncio.run(_fix_queue(broker.with_vhost(vhost), mgmt, vhost, row))
        print(f"{row['kind']} {row['name']}: fixed")
    return 1 if stuck else 0


def _fix_exchange(mgmt: Management, vhost: str, name: str) -> None:
    kind = dict(bus.EXCHANGES)[name]
    path = f"/exchanges/{mgmt.q(vhost)}/{mgmt.q(name)}"
    if any(x["name"] == name for x in mgmt.exchanges(vhost)):
        mgmt.request("DELETE", path)
    mgmt.request("PUT", path, {"type": kind, "durable": True, "auto_delete": False, "internal": False, "arguments": {}})


async def _fix_queue(url: BrokerURL, mgmt: Management, vhost: str, row: dict[str, Any]) -> None:
    log = logging.getLogger("gridbus.broker")
    connection = await aiormq.connect(url.alternatives[0].url)

    async def consumers(queue: str) -> Consumers:  # asked again just before the move: the plan may be old
        return await asyncio.to_thread(mgmt.queue_consumers, vhost, queue)

    try:
        name = row["name"]
        if name.endswith(topology.MIGRATING_SUFFIX):
            original = name[: -len(topology.MIGRATING_SUFFIX)]
            spec = wanted_queue(original, cluster=url.is_cluster, queue_type="auto") or QueueSpec(original, True, {})
            await reconcile.ensure(connection, _bound(mgmt, vhost, spec, name), log, consumers=consumers)
            return
        await reconcile.migrate(connection, _bound(mgmt, vhost, row["spec"], name), row["state"], log, consumers)
    finally:
        await connection.close()


def _bound(mgmt: Management, vhost: str, spec: QueueSpec, holder: str) -> QueueSpec:
    """``spec`` with the bindings ``holder`` has on the broker (the default exchange's aside)."""
    bindings = tuple((b["source"], b["routing_key"]) for b in mgmt.queue_bindings(vhost, holder) if b["source"])
    if spec.name == bus.DEAD and not bindings:
        bindings = ((bus.DEAD, ""),)
    return QueueSpec(spec.name, spec.durable, spec.arguments, bindings)
