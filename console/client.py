"""What every htcondor2-style client (Schedd, Collector, Negotiator, Startd) shares: the Session it
talks through, which it closes only if it made it, and finding an agent of a class on the broker."""

from __future__ import annotations

from typing import Any

from gridbus.console.session import Session
from gridbus.errors import HTCondorLookupError


class DaemonClient:
    def __init__(self, session: Session | None, url: str | None, timeout: float, *, name: str = "console",
                 connect: bool = False):
        self._own_session = session is None
        self.session = session or Session(url, timeout=timeout, name=name)
        if connect and self.session.url is None:
            self.session.addBroker(url)  # fail now, naming the broker, rather than at the first call
        self.timeout = timeout

    def first_agent(self, class_name: str, timeout: float | None = None) -> str:
        """The address of the agent serving ``class_name`` (the first by address, if several do)."""
        found = self.session.getObjects(_class=class_name, _timeout=timeout)
        if not found:
            raise HTCondorLookupError(f"no agent answers on this broker (getObjects(_class={class_name!r}) is empty)")
        return sorted(o._agent for o in found)[0]

    def close(self) -> None:
        if self._own_session:
            self.session.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
