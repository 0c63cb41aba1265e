"""Methods every agent serves, whatever its class: the schema's ``daemon`` class.

- ``RemoteParam``: the agent's effective configuration (HTCondor's condor_config_val -name, and
  htcondor2.RemoteParam). Administrators see every knob; other users do not see secrets: knobs
  whose names say they hold one are listed as hidden, and GRIDBUS_URL comes without its password.
- ``SetParam``: a runtime setting (HTCondor's condor_config_val -set), applied at the next
  reconfig and kept across later ones; refused unless ENABLE_RUNTIME_CONFIG is true, as in HTCondor.
- ``Advertise``: publish every ad now. A collector broadcasts it when it starts, so ads published
  before it listened are not missing until the next update interval.

A base of :class:`gridbus.agent.core.Agent`, which also gets the duty-cycle meter and the runtime
settings from here. ``COMMON_CLASS`` is the schema class of these methods: the dispatcher gives
them to every agent's own object.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from gridbus import bus
from gridbus.agent.dutycycle import DutyCycle, GcTime
from gridbus.agent.objects import Call, method
from gridbus.config import knob
from gridbus.status import forbidden, invalid

COMMON_CLASS = "daemon"

knob("ENABLE_RUNTIME_CONFIG", False, "SetParam (htcondor2's RemoteParam assignment, condor_config_val -set) is allowed")

# Knob names that hold secrets, shown to administrators only.
_SECRET = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIAL|(^|_)KEY($|_)")
_KNOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.]*")


def is_secret(name: str) -> bool:
    return bool(_SECRET.search(name.upper()))


def param_text(value: Any) -> str:
    """A knob's value as HTCondor's remote param gives it: text (lists comma-separated, whole
    floats without a fraction, booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(param_text(v) for v in value)
    return str(value)


class CommonMethods:
    # Provided by the Agent.
    kind: str
    config: Any
    url: Any
    log: Any

    def ads_changed(self, names: Iterable[str] | None = None) -> None:  # the Agent's
        raise NotImplementedError

    # ------------------------------------------------------------------ duty cycle
    _duty: DutyCycle | None = None

    def start_duty_cycle(self) -> None:
        self._duty = DutyCycle()
        if self._duty.install(asyncio.get_running_loop()):
            self._duty.watch_stalls(self._loop_stalled)

    def _loop_stalled(self, seconds: float, gc: GcTime, samples: list[str]) -> None:
        where = Counter(samples)
        self.log.warning(
            "the event loop ran %.2f s without waiting for I/O (every answer of this daemon waited), %.2f s of it "
            "in garbage collection (%.2f s cpu; %d full, %d young); sampled in: %s",
            seconds, gc.seconds, gc.cpu_seconds, gc.full, gc.young,
            "; ".join(f"{w} (x{n})" if n > 1 else w for w, n in where.most_common()) or "(no sample)")

    def ad_extras(self) -> dict[str, Any]:
        return {"DaemonCoreDutyCycle": self._duty.sample() if self._duty else 0.0}

    # ------------------------------------------------------------------ configuration
    runtime_params: dict[str, Any] | None = None

    def effective_config(self) -> Any:
        if self.config is None:
            from gridbus.config import Config

            self.config = Config.load(daemon=self.kind)
        return self.config

    def apply_runtime(self, cfg: Any) -> Any:
        """Apply the SetParam settings to a freshly loaded configuration (a reconfig's)."""
        from gridbus.config import ConfigError

        for name, value in (self.runtime_params or {}).items():
            try:
                cfg.set(name, value)
            except ConfigError as exc:
                self.log.warning("runtime setting not applied: %s", exc)
        return cfg

    @method(COMMON_CLASS)
    async def RemoteParam(self, call: Call, Names: list) -> dict:
        cfg = self.effective_config()
        if not all(isinstance(n, str) for n in Names):
            raise invalid("RemoteParam: Names must be a list of knob names (strings)")
        wanted = [n.upper() for n in Names] if Names else cfg.names()
        params: dict[str, str] = {}
        hidden: list[str] = []
        for name in wanted:
            if name not in cfg:
                continue  # absent, as HTCondor's param answers nothing for an unknown knob
            if not call.admin and is_secret(name):
                hidden.append(name)
                continue
            try:
                value = cfg.get(name)
            except (ValueError, KeyError) as exc:  # an invalid value is reported, not fatal
                params[name] = f"<invalid: {exc}>"
                continue
            if name == "GRIDBUS_URL" and not call.admin:
                value = bus.BrokerURL(str(value)).redacted()
            params[name] = param_text(value)
        return {"Params": params, "Hidden": hidden}

    @method(COMMON_CLASS)
    async def SetParam(self, call: Call, Name: str, Value: str) -> dict:
        if not _KNOB_NAME.fullmatch(Name):
            raise invalid(f"SetParam: {Name!r} is not a knob name (letters, digits, underscores, dots)")
        from gridbus.config import ConfigError, convert, declared

        if not self.effective_config().get("ENABLE_RUNTIME_CONFIG"):
            raise forbidden(f"SetParam: {self.kind} does not take runtime settings (ENABLE_RUNTIME_CONFIG is false)")
        key = Name.upper()
        knob = declared().get(key)
        if knob is not None:
            try:
                convert(knob.type, Value, f"{key} set")
            except ConfigError as exc:
                raise invalid(f"SetParam: {exc}") from None
        if self.runtime_params is None:
            self.runtime_params = {}
        self.runtime_params[key] = Value
        self.log.info("%s set %s = %r (applied at the next reconfig)", call.user, key, Value)
        return {}

    @method(COMMON_CLASS)
    async def Advertise(self, call: Call) -> dict:
        self.ads_changed()  # coalesced with any round already due
        return {}
