"""htcondor2's daemon commands and remote configuration: ``send_command``, ``DaemonCommands`` and
``RemoteParam``.

``send_command(ad, DaemonCommands.X, target)`` becomes a call of a master method (a gridbus master
starts, stops, restarts and reconfigures the daemons of its host):

==========================================  ================================================
command                                     master method
==========================================  ================================================
DaemonOn / DaemonOff / DaemonOffFast        Start / Stop / Stop(Graceful=false) of ``target``
DaemonsOn / DaemonsOff(Peaceful) / ..Fast   Start / Stop / Stop(Graceful=false) of them all
OffGraceful, OffPeaceful / OffFast, Force   Off / Off(Graceful=false): the master too
Restart, RestartPeaceful                    Restart(Master=true): the master and its daemons
Reconfig                                    Reconfig
==========================================  ================================================

Sent to another daemon's ad, the off and restart commands act on that daemon through the master
of its host (found in the collector by Machine); Reconfig reconfigures that host.

``ping(location)`` asks the daemon for one knob (a method every agent serves) and answers with
condor_ping's ad: whom the daemon authenticated and whether the call was authorized.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from gridbus.classad import ClassAd
from gridbus.console.session import Session
from gridbus.console.unsupported import NO_SECURITY_CONTEXT
from gridbus.errors import (
    HTCondorLookupError,
    HTCondorNotImplementedError,
    HTCondorPermissionError,
    HTCondorValueError,
)
from gridbus.rpc import CallFailed, MethodResult
from gridbus.status import Status


class DaemonCommand(enum.IntEnum):
    """htcondor2.DaemonCommand, with htcondor2's values."""

    DaemonOn = 469
    DaemonOff = 467
    DaemonOffFast = 468
    DaemonsOn = 483
    DaemonsOff = 454
    DaemonsOffFast = 461
    DaemonsOffPeaceful = 484
    OffFast = 60006
    OffForce = 60042
    OffGraceful = 60005
    OffPeaceful = 60015
    Reconfig = 60004
    Restart = 453
    RestartPeaceful = 485
    SetForceShutdown = 60041
    SetPeacefulShutdown = 60016


DaemonCommands = DaemonCommand

C = DaemonCommand
# Command -> (master method, its arguments, whether it names a daemon).
_ON_MASTER: dict[DaemonCommand, tuple[str, dict[str, Any], bool]] = {
    C.DaemonOn: ("Start", {}, True),
    C.DaemonOff: ("Stop", {"Graceful": True}, True),
    C.DaemonOffFast: ("Stop", {"Graceful": False}, True),
    C.DaemonsOn: ("Start", {}, False),
    C.DaemonsOff: ("Stop", {"Graceful": True}, False),
    C.DaemonsOffPeaceful: ("Stop", {"Graceful": True}, False),
    C.DaemonsOffFast: ("Stop", {"Graceful": False}, False),
    C.OffGraceful: ("Off", {"Graceful": True}, False),
    C.OffPeaceful: ("Off", {"Graceful": True}, False),
    C.OffFast: ("Off", {"Graceful": False}, False),
    C.OffForce: ("Off", {"Graceful": False}, False),
    C.Restart: ("Restart", {"Master": True}, False),
    C.RestartPeaceful: ("Restart", {"Master": True}, False),
    C.Reconfig: ("Reconfig", {}, False),
}
# Sent to a daemon other than the master: what its master does to it.
_ON_DAEMON: dict[DaemonCommand, tuple[str, dict[str, Any]]] = {
    C.OffGraceful: ("Stop", {"Graceful": True}),
    C.OffPeaceful: ("Stop", {"Graceful": True}),
    C.OffFast: ("Stop", {"Graceful": False}),
    C.OffForce: ("Stop", {"Graceful": False}),
    C.DaemonOff: ("Stop", {"Graceful": True}),
    C.DaemonOffFast: ("Stop", {"Graceful": False}),
    C.DaemonOn: ("Start", {}),
    C.Restart: ("Restart", {}),
    C.RestartPeaceful: ("Restart", {}),
    C.Reconfig: ("Reconfig", {}),
}


def _address(ad: Any) -> str:
    try:
        address = ad["MyAddress"]
    except (KeyError, TypeError):
        raise HTCondorValueError("the daemon's location ad carries no MyAddress (use an ad from Collector.locate)") from None
    if not isinstance(address, str) or "@" not in address:
        raise HTCondorValueError(f"MyAddress {address!r} is not a gridbus agent address (kind@name)")
    return address


def _session() -> Session:
    from gridbus.console.collector import _configured

    return Session(_configured("GRIDBUS_URL") or None, timeout=30)


def _check(result: MethodResult, what: str) -> MethodResult:
    if result.status == Status.FORBIDDEN:
        raise HTCondorPermissionError(f"{what}: {result.text}")
    if not result.ok:
        raise CallFailed(result, what)
    return result


def _master_of(session: Session, ad: Any) -> str:
    """The address of the master on the daemon's host, from the collector's Master ads."""
    from gridbus.classad import quote
    from gridbus.console.collector import AdType, Collector

    machine = ad.get("Machine") if isinstance(ad, Mapping) or hasattr(ad, "get") else None
    if not machine:
        raise HTCondorValueError("the daemon's ad carries no Machine, so its master cannot be found")
    with Collector(session) as coll:
        masters = coll.query(AdType.Master, f"Machine == {quote(str(machine))}", ["MyAddress"])
    if not masters:
        raise HTCondorLookupError(f"no master of host {machine} is in the collector")
    return str(masters[0]["MyAddress"])


def send_command(ad: Any, dc: DaemonCommand, target: str | None = None) -> None:
    """Send daemon command ``dc`` to the daemon whose location ``ad`` is (htcondor2.send_command)."""
    try:
        command = DaemonCommand(dc)
    except ValueError:
        raise HTCondorValueError(f"{dc!r} is not a DaemonCommand") from None
    address = _address(ad)
    kind, _, _name = address.partition("@")
    with _session() as session:
        if kind == "master":
            if command not in _ON_MASTER:
                raise HTCondorNotImplementedError(f"DaemonCommand.{command.name} has no gridbus equivalent")
            method, args, names_daemon = _ON_MASTER[command]
            args = dict(args)
            if names_daemon:
                if not target:
                    raise HTCondorValueError(f"DaemonCommand.{command.name} needs a target daemon (e.g. 'SCHEDD')")
                args["Daemon"] = str(target).upper()
            master = address
        else:
            if command not in _ON_DAEMON:
                raise HTCondorNotImplementedError(
                    f"DaemonCommand.{command.name} is for a master; send it to the master's ad")
            method, args = _ON_DAEMON[command]
            args = dict(args)
            if method != "Reconfig":
                args["Daemon"] = kind.upper()
            master = _master_of(session, ad)
        from gridbus.console.configuration import log

        log.info("sending %s to %s: %s(%s)", command.name, master, method,
                 ", ".join(f"{k}={v}" for k, v in args.items()))
        _check(session.call(master, method, args, timeout=120), f"{command.name} to {master}")


# The authorization levels a ping can test: a gridbus daemon authorizes each method call by the
# caller's broker account (daemon accounts are administrators), so what a ping shows is that the
# daemon answered a reading call; a level of writing or administration is tested by the call itself.
PING_LEVELS = ("DC_NOP", "READ", "ALLOW")
PING_TIMEOUT = 30.0  # seconds a ping waits for the daemon's answer


def ping(location: Any, authz: str | None = None, security: Any = None) -> ClassAd:
    """htcondor2.ping: reach the daemon at ``location`` (its address or its ad) and answer
    condor_ping's ad (AuthorizationSucceeded, Authentication, MyRemoteUserName, ...)."""
    if security is not None:
        raise HTCondorNotImplementedError(f"ping: {NO_SECURITY_CONTEXT}")
    if isinstance(location, str):
        address = location
        if "@" not in address:
            raise HTCondorValueError(f"{address!r} is not a gridbus agent address (kind@name)")
    else:
        address = _address(location)
    level = "DC_NOP" if authz is None else authz
    if not isinstance(level, str):
        raise HTCondorValueError(f"authz must be an authorization level such as READ, not {authz!r}")
    if level.upper() not in PING_LEVELS:
        raise HTCondorNotImplementedError(
            f"ping: gridbus authorizes each method call by the caller's broker account, not by HTCondor's "
            f"authorization levels; only {', '.join(PING_LEVELS)} can be tested (the daemon answers), not {level!r}")
    with _session() as session:
        result = session.call(address, "RemoteParam", {"Names": ["DAEMON_NAME"]}, timeout=PING_TIMEOUT)
        user = session.user
        encrypted = session.url is not None and session.url.parts.scheme == "amqps"
    _check(result, f"ping of {address}")
    return ClassAd({"MyAddress": address, "AuthorizationSucceeded": True, "Authentication": "YES",
                    "AuthMethods": "AMQP", "Encryption": "YES" if encrypted else "NO", "MyRemoteUserName": user})


class RemoteParam(MutableMapping):
    """The configuration of a running daemon, read over the bus (htcondor2.RemoteParam).

    Values are text, as the daemon's configuration gives them. Administrators see every knob;
    other users do not see secrets (those names raise KeyError). Assigning a value sets it in the
    daemon's runtime configuration, applied at its next reconfig (``send_command(ad,
    DaemonCommands.Reconfig)``), as ``condor_config_val -set`` does.
    """

    def __init__(self, ad: Any):
        self.address = _address(ad)
        self._session = _session()

    def _call(self, method: str, args: dict[str, Any]) -> MethodResult:
        return _check(self._session.call(self.address, method, args, timeout=30), f"{method} of {self.address}")

    def _params(self, names: list[str]) -> dict[str, str]:
        return dict(self._call("RemoteParam", {"Names": names}).outArgs.get("Params") or {})

    def __getitem__(self, name: str) -> str:
        found = self._params([str(name)])
        value = found.get(str(name).upper())
        if value is None:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def __setitem__(self, name: str, value: str) -> None:
        if not isinstance(value, str):
            raise HTCondorValueError("a remote configuration value is text, as in htcondor2")
        self._call("SetParam", {"Name": str(name), "Value": value})

    def __delitem__(self, name: str) -> None:
        raise HTCondorNotImplementedError("gridbus daemons keep runtime settings until they stop; none is removed")

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._params([])))

    def __len__(self) -> int:
        return len(self._params([]))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and str(name).upper() in self._params([name])

    def refresh(self) -> None:
        """htcondor2's cache refresh; every lookup here already asks the daemon."""

    def close(self) -> None:
        self._session.close()

    def __repr__(self) -> str:
        return f"RemoteParam({self.address})"
