"""Configuration: HTCondor-named knobs from one TOML file, overridden by ``GRIDBUS_<KNOB>``.

A module declares the knobs it reads at import time::

    from gridbus.config import Config, knob
    knob("UPDATE_INTERVAL", 300.0, "seconds between a daemon's ad updates")

and a daemon reads them from the effective configuration::

    cfg = Config.load(daemon="schedd")
    cfg.get("UPDATE_INTERVAL")       # 300.0, a float because the default is one
    cfg.source("UPDATE_INTERVAL")    # "default" | "file /etc/gridbus/gridbus.toml" | "env GRIDBUS_UPDATE_INTERVAL"

Precedence: the environment, then the daemon's section of the file (``[schedd]``), then the
file's flat keys, then the knob's default. Knob names are case-insensitive and stored upper-case.
A string value may refer to another knob as ``$(NAME)``, as in HTCondor (``SPOOL =
"$(LOCAL_DIR)/spool"``), so moving LOCAL_DIR moves everything under it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("gridbus.config")

ENV_PREFIX = "GRIDBUS_"
CONFIG_ENV = "GRIDBUS_CONFIG"  # names the file; not a knob
# The words of a true/false knob, any case (HTCondor's boolean knobs take T and F as well).
_TRUE = {"true", "1", "yes", "on", "t", "y"}
_FALSE = {"false", "0", "no", "off", "f", "n"}
_MACRO = re.compile(r"\$\(([A-Za-z0-9_.]+)\)")


class ConfigError(ValueError):
    """A configuration value cannot be read as its knob's type, or a file is not valid TOML."""


@dataclass(frozen=True)
class Knob:
    """A declared knob: its name, default, type (from the default) and what it means."""

    name: str
    default: Any
    doc: str
    type: type

    @property
    def env(self) -> str:
        return env_name(self.name)


_KNOBS: dict[str, Knob] = {}


def env_name(name: str) -> str:
    """The environment variable that overrides a knob (GRIDBUS_URL stays GRIDBUS_URL)."""
    name = name.upper()
    return name if name.startswith(ENV_PREFIX) else ENV_PREFIX + name


def knob(name: str, default: Any, doc: str, *, type: type | None = None) -> Knob:
    """Declare a knob; its type is the default's (bool, int, float, str or list of str).

    Declaring a knob twice with the same type and default is harmless (two modules may read it);
    another type or another default is refused, because a value must not depend on import order.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.]*", name):
        raise ValueError(f"knob name {name!r} must be letters, digits and underscores, starting with a letter")
    kind = type or _type_of(default)
    if kind not in (bool, int, float, str, list):
        raise ValueError(f"knob {name}: default {default!r} is not a bool, int, float, str or list")
    key = name.upper()
    existing = _KNOBS.get(key)
    if existing is not None:
        if existing.type is not kind:
            raise ValueError(
                f"knob {key} is already declared as {existing.type.__name__}, not {kind.__name__}"
            )
        if existing.default != (list(default) if isinstance(default, (list, tuple)) else default):
            # Two defaults would make the value depend on which module was imported first.
            raise ValueError(f"knob {key} is already declared with default {existing.default!r}, not {default!r}")
        return existing
    declared = Knob(key, list(default) if isinstance(default, (list, tuple)) else default, doc, kind)
    _KNOBS[key] = declared
    return declared


# Prefixes of knob names whose values keep their $(...) as written, and the names under them that
# do not: such a value is in a language that expands its own macros (HTCondor's job transforms
# refer to the transformed ad's attributes as $(MY.attr) and to their own temporary macros).
_VERBATIM: dict[str, frozenset[str]] = {}


def verbatim(prefix: str, *, except_names: tuple[str, ...] = ()) -> None:
    """Declare that knobs named ``prefix...`` (but ``except_names``) are not macro-expanded here."""
    _VERBATIM[prefix.upper()] = frozenset(n.upper() for n in except_names)


def _is_verbatim(key: str) -> bool:
    return any(key.startswith(p) and key not in but for p, but in _VERBATIM.items())


# Declared here, not by the schedd that reads them: every daemon reads the same file (and compares
# its knobs at a reconfig), and a transform's $(MY.attr) names no knob.
verbatim("JOB_TRANSFORM_", except_names=("JOB_TRANSFORM_NAMES",))


def declared() -> dict[str, Knob]:
    """Every knob declared so far (by the modules imported so far), by upper-case name."""
    return dict(_KNOBS)


def _type_of(value: Any) -> type:
    if isinstance(value, bool):
        return bool
    if isinstance(value, (list, tuple)):
        return list
    return type(value)


def truth(value: Any, where: str) -> bool:
    """A true/false knob's ``value``: a bool, 0 or 1, or a word (true/false, yes/no, on/off, t/f,
    y/n, 1/0; any case). Anything else is a ConfigError naming ``where`` (the knob, its source).
    Every true/false knob is read here, the typed knobs (`convert`) and the ones read by name."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{where}: {value!r} is not a valid bool (expected true or false: true/false, "
                      "yes/no, on/off, t/f, y/n, 1/0)")


def convert(kind: type, value: Any, where: str) -> Any:
    """``value`` as ``kind``; strings (from the environment) are parsed. ``where`` names the source."""
    if kind is bool:
        return truth(value, where)
    try:
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError("expected a whole number")
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError("expected a number")
            return float(value)
        if kind is list:
            if isinstance(value, str):
                return [part.strip() for part in value.split(",") if part.strip()]
            if isinstance(value, (list, tuple)):
                return [str(v) for v in value]
            raise ValueError("expected a list or a comma-separated string")
        if kind is str:
            if isinstance(value, (dict, list)):
                raise ValueError("expected a string")
            return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {value!r} is not a valid {kind.__name__} ({exc})") from None
    raise ConfigError(f"{where}: unsupported knob type {kind.__name__}")


def search_path() -> list[Path]:
    """Where Config.load looks when neither a path nor GRIDBUS_CONFIG names a file."""
    return [
        Path.cwd() / "gridbus.toml",
        Path.home() / ".config" / "gridbus" / "gridbus.toml",
        Path("/etc/gridbus/gridbus.toml"),
    ]


def find_file(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The configuration file in effect: ``path``, else GRIDBUS_CONFIG, else the search path."""
    env = os.environ if env is None else env
    if path is not None:
        return Path(path)
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV])
    for candidate in search_path():
        if candidate.is_file():
            return candidate
    return None


def read_file(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The flat knobs and the per-daemon sections of a TOML file, keys upper/lower-cased."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"configuration file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"configuration file {path} is not valid TOML: {exc}") from None
    flat: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            sections[key.lower()] = {k.upper(): v for k, v in value.items()}
        else:
            flat[key.upper()] = value
    return flat, sections


class Config:
    """The effective configuration of one daemon (or of a tool, with ``daemon=None``).

    Values are computed when asked for, so a knob declared by a module imported after the
    configuration was loaded still gets its file and environment values.
    """

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        daemon: str | None = None,
        env: Mapping[str, str] | None = None,
        path: Path | None = None,
        sections: Mapping[str, Mapping[str, Any]] | None = None,
    ):
        self.daemon = daemon.lower() if daemon else None
        self.path = path
        self._flat = {k.upper(): v for k, v in (values or {}).items()}
        self._sections = {k.lower(): {kk.upper(): vv for kk, vv in v.items()} for k, v in (sections or {}).items()}
        # The environment is read once, so one Config answers the same all its life; a reconfig
        # loads a new one.
        source_env = os.environ if env is None else env
        # An empty GRIDBUS_URL (``GRIDBUS_URL= gridbus ...``) is no URL: unset, as the console
        # and the bus take it, not a URL without a host that a daemon retries for ever.
        self._env = {k: v for k, v in source_env.items()
                     if k.startswith(ENV_PREFIX) and not (k == "GRIDBUS_URL" and not v.strip())}
        self._set: dict[str, Any] = {}

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, *, daemon: str | None = None,
             env: Mapping[str, str] | None = None) -> Config:
        """Read the configuration file in effect (see find_file); no file means defaults and env."""
        env = os.environ if env is None else env
        found = find_file(path, env)
        flat: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {}
        if found is not None:
            flat, sections = read_file(found)
            found = found.resolve()
        return cls(flat, daemon=daemon, env=env, path=found, sections=sections)

    def reload(self) -> Config:
        """The configuration as it is now (same file and daemon, the current environment)."""
        return Config.load(self.path, daemon=self.daemon) if self.path else Config.load(daemon=self.daemon)

    # ------------------------------------------------------------------ lookup
    def _raw(self, key: str) -> tuple[Any, str] | None:
        if key in self._set:
            return self._set[key], "set"
        knob_ = _KNOBS.get(key)
        env = knob_.env if knob_ else env_name(key)
        if env in self._env and key != "CONFIG":
            return self._env[env], f"env {env}"
        if self.daemon and key in self._sections.get(self.daemon, {}):
            return self._sections[self.daemon][key], f"file {self.path} [{self.daemon}]"
        if key in self._flat:
            return self._flat[key], f"file {self.path}"
        if knob_ is not None:
            return knob_.default, "default"
        return None

    def _value(self, key: str, seen: tuple[str, ...] = ()) -> Any:
        found = self._raw(key)
        if found is None:
            raise KeyError(f"no knob {key}: it is not declared, not in the configuration file and not in the environment")
        raw, where = found
        knob_ = _KNOBS.get(key)
        value = convert(knob_.type, raw, f"{key} from {where}") if knob_ else raw
        return value if _is_verbatim(key) else self._expand(value, key, (*seen, key))

    def _expand(self, value: Any, key: str, seen: tuple[str, ...]) -> Any:
        if isinstance(value, list):
            return [self._expand(v, key, seen) for v in value]
        if not isinstance(value, str) or "$(" not in value:
            return value

        def sub(m: re.Match[str]) -> str:
            ref = m.group(1).upper()
            if ref in seen:
                raise ConfigError(f"{key} refers to itself through $({ref})")
            if ref == "HOSTNAME" and self._raw(ref) is None:
                return socket.gethostname()
            ref_value = self._value(ref, seen)
            return ",".join(ref_value) if isinstance(ref_value, list) else str(ref_value)

        return _MACRO.sub(sub, value)

    def daemon_name(self, daemon: str) -> str:
        """A daemon's name (its address is ``<daemon>@<name>``): its <DAEMON>_NAME knob, or the
        host name where that is empty, as HTCondor names its daemons."""
        return str(self.get(f"{daemon.upper()}_NAME", "") or "") or socket.gethostname()

    def get(self, name: str, default: Any = ...) -> Any:
        """The typed value of a knob: env GRIDBUS_<NAME> > file > knob default.

        An undeclared knob found nowhere raises KeyError, unless ``default`` is given.
        """
        key = name.upper()
        if default is not ... and self._raw(key) is None:
            return default
        return self._value(key)

    def __getitem__(self, name: str) -> Any:
        return self._value(name.upper())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._raw(name.upper()) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def source(self, name: str) -> str:
        """Where a knob's value comes from: ``env GRIDBUS_X``, ``file /path`` or ``default``."""
        found = self._raw(name.upper())
        if found is None:
            raise KeyError(f"no knob {name.upper()}")
        return found[1]

    def names(self) -> list[str]:
        """Every knob known here: declared ones and those the file or the environment set."""
        keys = set(_KNOBS) | set(self._flat) | set(self._set)
        if self.daemon:
            keys |= set(self._sections.get(self.daemon, {}))
        return sorted(keys)

    def items(self) -> list[tuple[str, Any, str]]:
        """(name, value, source) of every knob, sorted by name, for ``gridbus config``."""
        out = []
        for key in self.names():
            try:
                value: Any = self._value(key)
            except ConfigError as exc:
                value = f"<invalid: {exc}>"
            out.append((key, value, self.source(key)))
        return out

    def set(self, name: str, value: Any) -> None:
        """Override a knob in this Config only (tests, command-line options); source ``set``."""
        key = name.upper()
        knob_ = _KNOBS.get(key)
        self._set[key] = convert(knob_.type, value, f"{key} set") if knob_ else value

    def changed(self, other: Config) -> list[str]:
        """Names of the knobs whose values differ between this configuration and ``other``."""
        out = []
        for key in sorted(set(self.names()) | set(other.names())):
            mine = self.get(key, None)
            theirs = other.get(key, None)
            if mine != theirs:
                out.append(key)
        return out

    def pick(self, **fields: str) -> dict[str, Any]:
        """``{field: value of its knob}`` for ``field="KNOB"`` pairs: a settings object's or a
        constructor's keyword arguments, with the field-to-knob table written once."""
        return {field_name: self.get(name) for field_name, name in fields.items()}

    def url(self) -> str:
        """The broker URL (GRIDBUS_URL)."""
        return str(self.get("GRIDBUS_URL"))

    def path_of(self, name: str) -> Path:
        """A directory knob (LOG, SPOOL, ...) as an absolute, user-expanded Path."""
        return Path(str(self.get(name))).expanduser().resolve()

    def __repr__(self) -> str:
        return f"Config(path={self.path}, daemon={self.daemon})"


def _default_local_dir() -> str:
    # In a checkout (an editable install) the pool lives in ./var beside pyproject.toml, which
    # .gitignore ignores; an installed gridbus keeps it under the user's data directory.
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file() and os.access(checkout, os.W_OK):
        return str(checkout / "var")
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data) / "gridbus")


# ---------------------------------------------------------------------- the common knobs
knob("GRIDBUS_URL", "amqp://guest:guest@127.0.0.1:5672/", "the broker URL (amqp:// or amqps://, with user, password and vhost)")
knob("UPDATE_INTERVAL", 300.0, "seconds between a daemon's ad updates")
knob("CLASSAD_LIFETIME", 0.0, "seconds an ad lives in the collector without an update; 0 means three update intervals")
knob("LOCAL_DIR", _default_local_dir(), "the host's gridbus directory; LOG, SPOOL and EXECUTE default to inside it")
knob("LOG", "$(LOCAL_DIR)/log", "directory of the daemon logs (MasterLog, CollectorLog, SchedLog, ...)")
knob("SPOOL", "$(LOCAL_DIR)/spool", "directory of the schedd's job queue and spooled files")
knob("RUN", "$(LOCAL_DIR)/run", "directory of the pid files of the master and its daemons")
knob("EXECUTE", "$(LOCAL_DIR)/execute", "directory under which the startd makes each job's scratch directory")
knob("MAX_DAEMON_LOG", 10_000_000, "bytes a daemon log grows to before it is rotated")
knob("MAX_NUM_DAEMON_LOG", 2, "rotated daemon logs kept besides the current one")
knob("DAEMON_LIST", ["MASTER", "COLLECTOR", "NEGOTIATOR", "SCHEDD", "STARTD", "WEB"],
     "the daemons the master runs on this host (WEB: the web console and /metrics on WEB_ADDRESS)")
knob("NEGOTIATOR_INTERVAL", 60.0, "seconds between negotiation cycles")
knob("START", "TRUE", "the startd's START expression: when a slot is willing to run a job")
knob("NUM_SLOTS", os.cpu_count() or 1, "number of static slots when no slot type is configured")
knob("SLOT_TYPE_1", "", "resources of slot type 1, e.g. 'cpus=100%, memory=100%' (empty: not used)")
knob("NUM_SLOTS_TYPE_1", 0, "number of slots of type 1")
knob("SLOT_TYPE_1_PARTITIONABLE", False, "slot type 1 is partitionable: carved into dynamic slots per request")
# Shared by the startd (UidDomain, FileSystemDomain of its slots), the schedd (User = Owner@UID_DOMAIN)
# and the submit side (a job's default Requirements): one declaration, one default.
knob("UID_DOMAIN", "", "the pool's account domain (User = Owner@UID_DOMAIN); empty means the machine's fully qualified name")
knob("FILESYSTEM_DOMAIN", "", "the shared file system's domain; empty means the machine's fully qualified name")
knob("CLAIM_WORKLIFE", 1200.0, "seconds a claim may be reused for further jobs; then it is released")
knob("ALLOW_ADMINISTRATOR", [], "broker users (besides the daemon account) who may call administrative methods")
knob("ALLOW_DAEMON", [], "broker users (besides the daemon account) who are daemons of the pool (methods with access = daemon)")
knob("QUEUE_SUPER_USERS", [], "broker users (besides the daemon account) who may change anyone's jobs")
knob("SUBMIT_REQUIREMENT_NAMES", [], "names of SUBMIT_REQUIREMENT_<NAME> expressions a submitted job must satisfy")
knob("COLLECTOR_PRIVATE_READERS", [], "broker users who may read private ads (claim ids); empty: the collector's own user")
