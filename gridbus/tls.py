"""TLS for every connection of a pool: amqps:// for the daemons (aio-pika) and the console and CLI
(pika), https for the management API.

Knobs (the environment's GRIDBUS_<KNOB> or the configuration file):

- TLS_CA_FILE: the CA certificates the broker's certificate must chain to (empty: the system's);
- TLS_CERT_FILE, TLS_KEY_FILE: this client's certificate and key (a broker that asks for client
  certificates, ``ssl_options.fail_if_no_peer_cert = true``, refuses a client without one or with
  one its CA did not sign);
- TLS_VERIFY: verify the broker's certificate and host name (true by default; false only for a
  test broker whose certificate names no host).

A URL with the scheme amqps gets a context from these; amqp stays plain.
"""

from __future__ import annotations

import os
import ssl
from typing import Any

from gridbus.config import knob

knob("TLS_CA_FILE", "", "CA certificates (PEM) the broker's certificate must chain to; empty: the system's")
knob("TLS_CERT_FILE", "", "this client's certificate (PEM) for amqps:// and the management API over https")
knob("TLS_KEY_FILE", "", "the key of TLS_CERT_FILE (PEM)")
knob("TLS_VERIFY", True, "verify the broker's certificate and host name on amqps:// and https")

_KNOBS = ("TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE", "TLS_VERIFY")


def settings(cfg: Any = None) -> dict[str, Any]:
    """The TLS knobs: from ``cfg`` (a gridbus Config), else the environment."""
    out: dict[str, Any] = {}
    for name in _KNOBS:
        value: Any = None
        if cfg is not None:
            try:
                value = cfg.get(name)
            except Exception:
                value = None
        if value is None:
            value = os.environ.get(f"GRIDBUS_{name}")
        out[name] = value
    verify = out["TLS_VERIFY"]
    out["TLS_VERIFY"] = verify if isinstance(verify, bool) else str(verify or "true").lower() not in (
        "false", "0", "no", "off")
    return out


def client_context(cfg: Any = None) -> ssl.SSLContext:
    """A client context: the CA file (else the system's), our certificate, verification on unless
    TLS_VERIFY is false."""
    s = settings(cfg)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=s["TLS_CA_FILE"] or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if s["TLS_CERT_FILE"]:
        ctx.load_cert_chain(s["TLS_CERT_FILE"], s["TLS_KEY_FILE"] or None)
    if not s["TLS_VERIFY"]:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def is_tls(url: Any) -> bool:
    return str(url).split("://", 1)[0].lower() in ("amqps", "https")


def aio_pika_kwargs(url: Any) -> dict[str, Any]:
    """What aio-pika's connect takes for ``url``: ``ssl_context`` for amqps, nothing otherwise."""
    return {"ssl_context": client_context()} if is_tls(url) else {}


def pika_ssl_options(url: Any, host: str) -> Any:
    """pika's SSLOptions for ``url`` (None for amqp)."""
    if not is_tls(url):
        return None
    import pika

    return pika.SSLOptions(client_context(), server_hostname=host)


def urlopen_kwargs(url: str) -> dict[str, Any]:
    """What urllib's urlopen takes for the management API at ``url``."""
    return {"context": client_context()} if is_tls(url) else {}
