"""The htcondor2-style collector client: `Collector`, `AdType`, `DaemonType`.

    from gridbus.console import Collector, AdType, DaemonType
    coll = Collector()                                   # GRIDBUS_URL, or Collector("amqp://...")
    slots = coll.query(AdType.Startd, 'Cpus >= 4', ["Name", "Cpus"])
    schedd_ad = coll.locate(DaemonType.Schedd, "submit1")

Names and argument order mirror `htcondor2.Collector`; ``pool`` is a broker URL here instead of a
``host:port``. Which collector is asked, in this order: the ``name`` given to the constructor,
else the knob COLLECTOR_NAME (``GRIDBUS_COLLECTOR_NAME``), else the first (by address) of the
agents that answer ``getObjects(_class="collector")``; the address is ``collector@<name>``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from gridbus.console.client import DaemonClient
from gridbus.console.session import Session
from gridbus.errors import HTCondorConnectionError, HTCondorValueError
from gridbus.rpc import CallFailed, CallTimeout, MethodResult


class AdType(enum.IntEnum):
    """Kinds of ads to query; values are htcondor2's."""

    Startd = 0
    Schedd = 1
    Master = 2
    StartdPrivate = 5
    Submitter = 6
    Collector = 7
    License = 8
    Any = 10
    Negotiator = 13
    HAD = 14
    Generic = 15
    Credd = 16
    Grid = 19
    Placementd = 20
    Defrag = 22
    Accounting = 23
    Slot = 24
    StartDaemon = 25


class DaemonType(enum.IntEnum):
    """Kinds of daemons to locate; values are htcondor2's."""

    none = 0
    Any = 1
    Master = 2
    Schedd = 3
    Startd = 4
    Collector = 5
    Negotiator = 6
    Credd = 13
    Placementd = 15
    HAD = 17
    Generic = 18


# htcondor2's plural names of the same enums.
AdTypes = AdType
DaemonTypes = DaemonType

# AdType -> (MyType asked of the collector or None for every type, private ads wanted).
_AD_MYTYPE: dict[AdType, tuple[str | None, bool]] = {
    AdType.Startd: ("Machine", False),
    AdType.Slot: ("Machine", False),
    AdType.StartdPrivate: ("Machine", True),
    AdType.Schedd: ("Scheduler", False),
    AdType.Master: ("Master", False),
    AdType.Submitter: ("Submitter", False),
    AdType.Collector: ("Collector", False),
    AdType.Negotiator: ("Negotiator", False),
    AdType.Any: (None, False),
    AdType.License: ("License", False),
    AdType.HAD: ("HAD", False),
    AdType.Generic: ("Generic", False),
    AdType.Credd: ("Credd", False),
    AdType.Grid: ("Grid", False),
    AdType.Placementd: ("Placementd", False),
    AdType.Defrag: ("Defrag", False),
    AdType.Accounting: ("Accounting", False),
    AdType.StartDaemon: ("StartDaemon", False),
}

# DaemonType -> the DaemonType name the collector's Locate understands.
_DAEMON_NAME = {
    DaemonType.Master: "Master",
    DaemonType.Schedd: "Schedd",
    DaemonType.Startd: "Startd",
    DaemonType.Collector: "Collector",
    DaemonType.Negotiator: "Negotiator",
    DaemonType.Credd: "Credd",
    DaemonType.Placementd: "Placementd",
    DaemonType.HAD: "HAD",
    DaemonType.Generic: "Generic",
}


class NoCollector(HTCondorConnectionError):
    """No collector answers on the broker; the message names the broker."""


class DaemonNotFound(CallFailed, LookupError):
    """locate() found no ad of that daemon (it is down or has not advertised yet)."""


def _classad(ad: dict[str, Any]) -> Any:
    from gridbus.classad import ClassAd

    return ClassAd(ad)


class Collector(DaemonClient):
    """A client of the pool's collector (htcondor2.Collector)."""

    def __init__(
        self,
        pool: str | Session | None = None,
        *,
        name: str | None = None,
        timeout: float = 30.0,
    ):
        if isinstance(pool, Session):
            super().__init__(pool, None, timeout)
        else:
            if pool is not None and (not isinstance(pool, str) or "://" not in pool):
                raise HTCondorValueError(
                    f"pool must be a broker URL such as amqp://user:password@host:5672/ (or None for "
                    f"GRIDBUS_URL), got {pool!r}"
                )
            super().__init__(None, pool or _configured("GRIDBUS_URL") or None, timeout, name="collector-client")
        configured = name or _configured("COLLECTOR_NAME")
        self._address: str | None = f"collector@{configured}" if configured else None
        self._pinned = self._address is not None

    # ------------------------------------------------------------------ addressing
    @property
    def address(self) -> str:
        """The collector's agent address, found once (see the module docstring for the rule)."""
        if self._address is None:
            try:
                self._address = self.first_agent("collector", timeout=3.0)
            except LookupError:
                url = self.session.url.redacted() if self.session.url else "the broker"
                raise NoCollector(f"no collector answers on {url} (is one running? set COLLECTOR_NAME to name it)") from None
        return self._address

    def _call(self, method: str, args: dict[str, Any]) -> MethodResult:
        try:
            return self.session.call(self.address, method, args, timeout=self.timeout)
        except CallTimeout:
            if self._pinned:
                raise
            # The collector may have been replaced by one of another name: look again, once.
            self._address = None
            return self.session.call(self.address, method, args, timeout=self.timeout)

    # ------------------------------------------------------------------ htcondor2 API
    def query(
        self,
        ad_type: AdType = AdType.Any,
        constraint: Any = "true",
        projection: Iterable[str] | None = None,
        statistics: str | None = None,
        limit: int = -1,
    ) -> list[Any]:
        """Ads of ``ad_type`` matching ``constraint``, with only the ``projection`` attributes.

        ``statistics`` is accepted for htcondor2 compatibility; the Collector ad always carries
        the collector's statistics.
        """
        mytype, private = _AD_MYTYPE[AdType(ad_type)]
        if constraint is None or (isinstance(constraint, str) and not constraint.strip()):
            constraint = "true"
        if not isinstance(constraint, str):
            constraint = str(constraint)  # an ExprTree: its canonical text
        args = {
            "AdTypes": [mytype] if mytype else [],
            "Constraint": constraint,
            "Projection": list(projection or []),
            "Limit": int(limit),
            "Private": private,
        }
        result = self._call("Query", args)
        if not result.ok:
            raise CallFailed(result, f"query of {AdType(ad_type).name} ads")
        return [_classad(ad) for ad in result.outArgs.get("Ads", [])]

    def locate(self, daemon_type: DaemonType, name: str | None = None) -> Any:
        """The ad of one daemon (with its MyAddress); DaemonNotFound when none is held."""
        result = self._call("Locate", {"DaemonType": _daemon_name(daemon_type), "Name": name or ""})
        if not result.ok:
            if result.status == 0x10001:
                raise DaemonNotFound(result, f"locate {DaemonType(daemon_type).name}")
            raise CallFailed(result, f"locate {DaemonType(daemon_type).name}")
        return _classad(result.outArgs["Ad"])

    def locateAll(self, daemon_type: DaemonType) -> list[Any]:
        """The ads of every daemon of that type."""
        ad_type = {
            DaemonType.Schedd: AdType.Schedd,
            DaemonType.Startd: AdType.Startd,
            DaemonType.Master: AdType.Master,
            DaemonType.Collector: AdType.Collector,
            DaemonType.Negotiator: AdType.Negotiator,
            DaemonType.Credd: AdType.Credd,
            DaemonType.Placementd: AdType.Placementd,
            DaemonType.HAD: AdType.HAD,
            DaemonType.Generic: AdType.Generic,
        }.get(DaemonType(daemon_type))
        if ad_type is None:
            raise HTCondorValueError(f"locateAll needs a specific daemon type, not {DaemonType(daemon_type).name}")
        return self.query(ad_type)

    def __repr__(self) -> str:
        return f"Collector({self._address or 'not located yet'})"


def _daemon_name(daemon_type: DaemonType) -> str:
    name = _DAEMON_NAME.get(DaemonType(daemon_type))
    if name is None:
        raise HTCondorValueError(f"locate needs a specific daemon type, not {DaemonType(daemon_type).name}")
    return name


def _configured(knob: str) -> str:
    """A knob's value for a console: the environment (GRIDBUS_<KNOB>), else the file, else ''."""
    from gridbus.config import Config

    return str(Config.load().get(knob, "") or "")
