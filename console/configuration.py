"""htcondor2's configuration functions: ``param``, ``reload_config``, ``set_subsystem``,
``enable_debug``, ``disable_debug`` and ``enable_log``.

``param`` is the configuration this process reads (the gridbus configuration file and the
``GRIDBUS_*`` environment, see gridbus.config), as a dict with typed values: a declared knob's
value has the knob's type (``param["UPDATE_INTERVAL"]`` is a number), other names are text.
Assigning sets a value in this process only, until ``reload_config()`` reads the configuration
again. As in HTCondor, a name prefixed by the subsystem (``SCHEDD.TEST_FOO``) wins over the bare
name once ``set_subsystem("SCHEDD")`` is called; the subsystem also picks the file's section.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

from gridbus.config import Config
from gridbus.errors import HTCondorTypeError, HTCondorValueError

# The daemon modules that declare knobs (importing a module declares its knobs); a daemon's
# package alone declares only what its __init__ imports. Names are under gridbus.agents, but for
# a full name (the web console's, which lives with the console).
DAEMON_MODULES = ("master.agent", "master.children", "collector", "negotiator.main", "schedd.settings",
                  "schedd.shadows", "schedd.scheduniv", "startd.settings", "gridbus.console.web.knobs")
TOOL = "TOOL"

log = logging.getLogger("gridbus.console")


def declare_daemon_knobs() -> None:
    """Import every daemon module, so the knobs they read are declared with their types."""
    for module in DAEMON_MODULES:
        try:
            importlib.import_module(module if module.startswith("gridbus.") else f"gridbus.agents.{module}")
        except Exception:  # a daemon that does not import still leaves the others' knobs
            pass


class Param(MutableMapping):
    """htcondor2.param: typed configuration values, as a mutable mapping."""

    def __init__(self) -> None:
        self.subsystem = TOOL
        self._overrides: dict[str, Any] = {}  # set in this process, by upper-case name
        self._config: Config | None = None

    # ------------------------------------------------------------------ the configuration
    def config(self) -> Config:
        if self._config is None:
            declare_daemon_knobs()
            cfg = Config.load(daemon=None if self.subsystem == TOOL else self.subsystem.lower())
            for name, value in self._overrides.items():
                cfg.set(name, value)
            self._config = cfg
        return self._config

    def reload(self) -> None:
        self._overrides.clear()
        self._config = None

    def set_subsystem(self, name: str) -> None:
        self.subsystem = name.upper()
        self.config().daemon = None if self.subsystem == TOOL else self.subsystem.lower()

    def _names(self, key: str) -> list[str]:
        key = key.upper()
        return [f"{self.subsystem}.{key}", key] if self.subsystem else [key]

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, name: str) -> Any:
        if not isinstance(name, str):
            raise HTCondorTypeError(f"a knob name is a string, not {type(name).__name__}")
        cfg = self.config()
        for key in self._names(name):
            if key in cfg:
                return cfg.get(key)
        raise KeyError(name)

    def __setitem__(self, name: str, value: Any) -> None:
        if not isinstance(name, str):
            raise HTCondorTypeError(f"a knob name is a string, not {type(name).__name__}")
        key = name.upper()
        try:
            self.config().set(key, value)
        except ValueError as exc:  # the value does not read as the knob's type
            raise HTCondorValueError(str(exc)) from None
        self._overrides[key] = value

    def __delitem__(self, name: str) -> None:
        key = name.upper()
        if key not in self._overrides:
            raise KeyError(name)
        del self._overrides[key]
        self._config = None  # rebuilt from the file, the environment and the other settings

    def __iter__(self) -> Iterator[str]:
        return iter(self.config().names())

    def __len__(self) -> int:
        return len(self.config().names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(key in self.config() for key in self._names(name))

    def __repr__(self) -> str:
        return f"<param: {len(self)} knobs, subsystem {self.subsystem}>"


param = Param()


def reload_config() -> None:
    """Read the configuration again; values set in this process are forgotten (as htcondor2's)."""
    param.reload()


def set_subsystem(name: str, daemon_type: Any = None) -> None:
    """Identify this process as subsystem ``name`` (TOOL, SCHEDD, ...): ``<NAME>.KNOB`` settings
    win over ``KNOB`` and the configuration file's section of that daemon applies."""
    if not isinstance(name, str) or not name:
        raise HTCondorValueError("set_subsystem needs a subsystem name such as TOOL or SCHEDD")
    param.set_subsystem(name)


_handlers: dict[str, logging.Handler] = {}


def _level() -> int:
    levels = str(param.get(f"{param.subsystem}_DEBUG", "") or "")
    return logging.DEBUG if ("D_FULLDEBUG" in levels or "D_ALL" in levels) else logging.INFO


def _install(kind: str, handler: logging.Handler) -> None:
    old = _handlers.pop(kind, None)
    if old is not None:
        log.removeHandler(old)
        old.close()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%m/%d/%y %H:%M:%S"))
    log.addHandler(handler)
    _handlers[kind] = handler
    log.setLevel(min(h.level or logging.DEBUG for h in _handlers.values()) if _handlers else logging.WARNING)
    handler.setLevel(_level())


def enable_debug() -> None:
    """Send this process's gridbus console log to stderr, at the level <SUBSYS>_DEBUG names."""
    _install("debug", logging.StreamHandler(sys.stderr))


def disable_debug() -> None:
    handler = _handlers.pop("debug", None)
    if handler is not None:
        log.removeHandler(handler)


def enable_log() -> None:
    """Write this process's gridbus console log to the file <SUBSYS>_LOG names (TOOL_LOG)."""
    knob = f"{param.subsystem}_LOG"
    path = param.get(knob)
    if not path:
        raise HTCondorValueError(f"enable_log: {knob} names no file; set param[{knob!r}] first")
    _install("log", logging.FileHandler(str(path)))
