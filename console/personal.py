"""htcondor2.personal: ``PersonalPool``, a personal pool started and stopped from Python.

    from gridbus.console.personal import PersonalPool
    with PersonalPool(local_dir=Path.cwd() / "personal") as pool:
        pool.schedd.submit(Submit(executable="/bin/true"))

The pool is what `gridbus pool up --local-dir` runs (a master and its collector, negotiator, schedd
and startd), with LOCAL_DIR ``local_dir``: its configuration file ``local_dir/gridbus.toml`` holds
LOCAL_DIR and the ``config`` given, then ``raw_config`` (TOML) verbatim. The broker is GRIDBUS_URL's,
and the pool runs in a vhost of its own (gridbus.personal.open_own_pool), so it is independent of
every other pool on the machine, as HTCondor's personal pools are: the user's own `gridbus pool up`,
another PersonalPool. stop() (or leaving the ``with`` block) stops it and removes its vhost. Given
``url``, the pool runs in that URL's vhost instead, as it is.
"""

from __future__ import annotations

import atexit
import enum
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gridbus.config import Config
from gridbus.errors import HTCondorRuntimeError, HTCondorValueError
from gridbus.personal import own_pool_url


class PersonalPoolState(str, enum.Enum):  # noqa: UP042 - htcondor2's own spelling of the states
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZED = "INITIALIZED"
    STARTING = "STARTING"
    READY = "READY"
    STOPPING = "STOPPING"
    STOPPED = "STOPPED"

    def __str__(self) -> str:
        return f"PersonalPoolState.{self.name}"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string is a JSON string


class PersonalPool:
    """A personal pool (htcondor2.personal.PersonalPool)."""

    def __init__(
        self,
        local_dir: str | os.PathLike[str] | None = None,
        config: Mapping[str, Any] | None = None,
        raw_config: str | None = None,
        detach: bool = False,
        use_config: bool = True,
        *,
        url: str | None = None,
        timeout: float = 90.0,
    ):
        self.local_dir = Path(local_dir) if local_dir is not None else Path.home() / ".gridbus" / "personal"
        self.config = {str(k).upper(): v for k, v in (config or {}).items()}
        self.raw_config = raw_config or ""
        self.detached = detach
        self.use_config = use_config  # htcondor2 makes the pool's the process's configuration
        self.timeout = timeout
        self.url = url or os.environ.get("GRIDBUS_URL") or str(Config.load().get("GRIDBUS_URL"))
        self.own_vhost = url is None  # a vhost of its own, made at start() (gridbus pool up --local-dir)
        self.state = PersonalPoolState.UNINITIALIZED
        self._schedd: Any = None
        self._collector: Any = None
        self._saved_env: dict[str, str | None] = {}
        self.initialize()

    # ------------------------------------------------------------------ files
    @property
    def config_file(self) -> Path:
        return self.local_dir / "gridbus.toml"

    def initialize(self, overwrite_config: bool = True) -> PersonalPool:
        self.local_dir = self.local_dir.expanduser().resolve()
        self.local_dir.mkdir(parents=True, exist_ok=True)
        if overwrite_config or not self.config_file.exists():
            lines = ["# written by gridbus.console.personal.PersonalPool", f"LOCAL_DIR = {_toml_value(str(self.local_dir))}"]
            lines += [f"{name} = {_toml_value(value)}" for name, value in self.config.items() if name != "LOCAL_DIR"]
            self.config_file.write_text("\n".join(lines) + "\n" + self.raw_config + "\n")
        self.state = PersonalPoolState.INITIALIZED
        return self

    def env(self) -> dict[str, str]:
        """The environment of the pool's processes and of ``run_command``."""
        env = {k: v for k, v in os.environ.items() if k not in ("GRIDBUS_CONFIG", "GRIDBUS_LOCAL_DIR")}
        env.update(GRIDBUS_URL=self.url, GRIDBUS_CONFIG=str(self.config_file))
        # The `gridbus` command beside this Python comes first, as in an activated environment.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        return env

    def _gridbus(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gridbus.console.cli", *args], env=self.env(),
                              capture_output=True, text=True, timeout=timeout, cwd=str(self.local_dir))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> PersonalPool:
        """Start the pool; returns once every daemon serves (state READY)."""
        if self.state is PersonalPoolState.READY:
            return self
        self.state = PersonalPoolState.STARTING
        own = ["--local-dir", str(self.local_dir)] if self.own_vhost else []
        done = self._gridbus("pool", "up", "--detach", "--timeout", str(self.timeout), *own, timeout=self.timeout + 30)
        if done.returncode != 0:
            self.state = PersonalPoolState.STOPPED
            self._gridbus("pool", "down", *own, timeout=90)
            raise HTCondorRuntimeError(f"the personal pool in {self.local_dir} did not start: "
                                       f"{(done.stderr or done.stdout).strip()}")
        if self.own_vhost:
            self.url = own_pool_url(self.local_dir) or self.url
        self.state = PersonalPoolState.READY
        if self.use_config:
            self._use_config()
        if not self.detached:
            atexit.register(self._atexit)
        return self

    def stop(self) -> PersonalPool:
        """Stop the pool and every process it started; returns once they are gone (STOPPED)."""
        if self.state in (PersonalPoolState.STOPPED, PersonalPoolState.INITIALIZED, PersonalPoolState.UNINITIALIZED):
            self.state = PersonalPoolState.STOPPED
            return self
        self.state = PersonalPoolState.STOPPING
        for client in (self._schedd, self._collector):
            if client is not None:
                client.close()
        self._schedd = self._collector = None
        done = self._gridbus("pool", "down", *(["--local-dir", str(self.local_dir)] if self.own_vhost else []),
                             timeout=120)
        self._restore_config()
        if done.returncode != 0:
            raise HTCondorRuntimeError(f"stopping the personal pool in {self.local_dir} failed: "
                                       f"{(done.stderr or done.stdout).strip()}")
        self.state = PersonalPoolState.STOPPED
        return self

    def _atexit(self) -> None:
        if not self.detached and self.state is PersonalPoolState.READY:
            self.stop()

    def detach(self) -> PersonalPool:
        """Leave the pool running when this object goes away or Python exits."""
        self.detached = True
        return self

    def attach(self) -> PersonalPool:
        """Stop the pool again when Python exits (undoes detach)."""
        self.detached = False
        return self

    def __enter__(self) -> PersonalPool:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _use_config(self) -> None:
        # As htcondor2's use_config: this process's configuration becomes the pool's, so Schedd()
        # and param find it.
        from gridbus.console.configuration import reload_config

        for key in ("GRIDBUS_URL", "GRIDBUS_CONFIG"):
            self._saved_env.setdefault(key, os.environ.get(key))
        os.environ.update(GRIDBUS_URL=self.url, GRIDBUS_CONFIG=str(self.config_file))
        reload_config()

    def _restore_config(self) -> None:
        from gridbus.console.configuration import reload_config

        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._saved_env:
            self._saved_env = {}
            reload_config()

    # ------------------------------------------------------------------ clients
    def _ready(self, what: str) -> None:
        if self.state is not PersonalPoolState.READY:
            raise HTCondorRuntimeError(f"the personal pool is {self.state.value}, so it has no {what}; start() it first")

    @property
    def schedd(self) -> Any:
        self._ready("schedd")
        if self._schedd is None:
            from gridbus.console.schedd import Schedd

            self._schedd = Schedd(url=self.url)
        return self._schedd

    @property
    def collector(self) -> Any:
        self._ready("collector")
        if self._collector is None:
            from gridbus.console.collector import Collector

            self._collector = Collector(self.url)
        return self._collector

    def get_config_val(self, macro: str, default: str | None = None) -> str | None:
        """A knob's value in the pool's configuration, as text (condor_config_val's)."""
        from gridbus.agent.common import param_text
        from gridbus.console.configuration import declare_daemon_knobs

        declare_daemon_knobs()
        cfg = Config.load(self.config_file, env=self.env())
        if macro.upper() not in cfg:
            return default
        return param_text(cfg.get(macro))

    def run_command(self, args: list[str], stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
                    universal_newlines: bool = True, **kwargs: Any) -> subprocess.CompletedProcess:
        """Run a command (``["gridbus", "q"]``, a script) with the pool's configuration."""
        if not args:
            raise HTCondorValueError("run_command needs the command to run")
        return subprocess.run(list(args), stdout=stdout, stderr=stderr, text=universal_newlines,
                              env={**self.env(), **kwargs.pop("env", {})}, **kwargs)

    def __repr__(self) -> str:
        return f"PersonalPool(local_dir={self.local_dir}, state={self.state})"
