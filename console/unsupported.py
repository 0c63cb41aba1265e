"""htcondor2's names that have no meaning on gridbus: each is here so a script that names it
imports, and each use raises HTCondorNotImplementedError with a sentence saying why.

- Credd, CredCheck: gridbus has no credential daemon. Jobs run under the identity the broker
  authenticated and carry no stored passwords, Kerberos tickets or OAuth tokens.
- Placementd: gridbus has no placement daemon; a user's identity is the broker's account.
- SecurityContext: security is the broker connection's (GRIDBUS_URL's account and TLS), not
  per-command HTCondor tokens.
- send_alive, set_ready_state: a gridbus master watches the daemons it started through their
  processes and the ads they publish; it takes no keep-alive or readiness message from a process.
- load_a_config_usermap_file, reload_config_usermaps: gridbus configures no CLASSAD_USER_MAPFILE
  maps (the ClassAd userMap() function answers as HTCondor does for an unknown map).
"""

from __future__ import annotations

from typing import Any, NoReturn

from gridbus.errors import HTCondorNotImplementedError

NO_CREDD = ("gridbus has no credd: jobs run under the identity the broker authenticated, and no "
            "passwords, Kerberos tickets or OAuth tokens are stored for them")
NO_PLACEMENTD = "gridbus has no placement daemon: a user's identity is the broker account it connects as"
NO_SECURITY_CONTEXT = ("gridbus secures the broker connection (GRIDBUS_URL's account and TLS); it takes no "
                       "per-command HTCondor token")
NO_KEEPALIVE = ("a gridbus master watches the daemons it started through their processes and their ads; "
                "it takes no keep-alive or ready state from another process")
NO_USERMAPS = "gridbus configures no ClassAd user map files (CLASSAD_USER_MAPFILE_*)"


def _refuse(what: str, why: str) -> NoReturn:
    raise HTCondorNotImplementedError(f"{what}: {why}")


class Credd:
    """htcondor2.Credd: refused (see the module's text)."""

    def __init__(self, location: Any = None) -> None:
        _refuse("Credd", NO_CREDD)


class CredCheck:
    """htcondor2.CredCheck, what Credd.check_user_service_creds answers: refused with Credd."""

    def __init__(self, services: Any = None, url_or_error: Any = None) -> None:
        _refuse("CredCheck", NO_CREDD)


class Placementd:
    """htcondor2.Placementd: refused (see the module's text)."""

    def __init__(self, location: Any = None) -> None:
        _refuse("Placementd", NO_PLACEMENTD)


class SecurityContext:
    """htcondor2.SecurityContext: refused (see the module's text)."""

    def __init__(self, token: Any = None) -> None:
        _refuse("SecurityContext", NO_SECURITY_CONTEXT)


def send_alive(ad: Any = None, pid: int | None = None, timeout: int | None = None) -> NoReturn:
    """htcondor2.send_alive: refused (see the module's text)."""
    _refuse("send_alive", NO_KEEPALIVE)


def set_ready_state(state: str = "Ready") -> NoReturn:
    """htcondor2.set_ready_state: refused (see the module's text)."""
    _refuse("set_ready_state", NO_KEEPALIVE)


def load_a_config_usermap_file(*args: Any, **kwargs: Any) -> NoReturn:
    """htcondor2.load_a_config_usermap_file: refused (see the module's text)."""
    _refuse("load_a_config_usermap_file", NO_USERMAPS)


def reload_config_usermaps(*args: Any, **kwargs: Any) -> NoReturn:
    """htcondor2.reload_config_usermaps: refused (see the module's text)."""
    _refuse("reload_config_usermaps", NO_USERMAPS)
