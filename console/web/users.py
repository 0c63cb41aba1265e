"""Signed-in users: each checked by the broker itself, each acting through the console API as
that broker user.

Sign-in opens a broker connection with the name and password given: the broker's own users are
the console's users, and what it refuses, the console refuses. The web daemon keeps, per signed-in
user, a console `Session` logged in as that user, and every call a page makes for them (Query,
GetAd, Hold, Release, Remove, GetPriorities) goes through it: the schedd sees the user's own
``user_id``, so its rules (an owner acts on their own jobs, a queue super user or administrator on
all) decide, and the console keeps no copy of them.

The console API is synchronous (pika); each user's calls run on a thread of that user's, one at
a time, off the daemon's event loop.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import aio_pika
import pika.exceptions

from gridbus.bus import BrokerURL
from gridbus.console.session import Session
from gridbus.errors import HTCondorConnectionError

T = TypeVar("T")

SESSION_IDLE = 8 * 3600.0  # seconds a sign-in lasts without a request
LOGIN_TIMEOUT = 10.0


class SignInRefused(Exception):
    """The broker refused the name and password (or could not be reached): the sentence says which."""


async def check_credentials(pool_url: BrokerURL, user: str, password: str) -> BrokerURL:
    """The pool's URL with ``user``'s credentials, once the broker accepted them (a connection
    opened and closed); SignInRefused otherwise."""
    if not user or not password:
        raise SignInRefused("give a broker user name and its password")
    url = pool_url.with_credentials(user, password)
    first = url.alternatives[0]
    try:
        connection = await aio_pika.connect(first.url, timeout=LOGIN_TIMEOUT, client_properties={
            "connection_name": f"gridbus web sign-in of {user}"})
    except aio_pika.exceptions.ProbableAuthenticationError:
        raise SignInRefused(f"the broker refused the login of {user!r}: wrong user name or password") from None
    except aio_pika.exceptions.AMQPConnectionError as exc:
        text = str(exc)
        if "ACCESS_REFUSED" in text or "access_refused" in text.lower():
            raise SignInRefused(f"the broker refused the login of {user!r}: wrong user name or password") from None
        if "NOT_ALLOWED" in text or "access to vhost" in text:
            raise SignInRefused(f"{user!r} may not use this pool's vhost {url.vhost!r}") from None
        raise SignInRefused(f"the broker at {first.redacted()} could not be reached: {exc}") from None
    except (OSError, TimeoutError) as exc:
        raise SignInRefused(f"the broker at {first.redacted()} could not be reached: {exc}") from None
    await connection.close()
    return url


class UserConsole:
    """One signed-in user: a console Session as that user, on a thread of its own."""

    def __init__(self, user: str, url: BrokerURL, timeout: float = 30.0):
        self.user = user
        self.url = url
        self.timeout = timeout
        self.token = secrets.token_urlsafe(32)
        self.last_used = time.monotonic()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"web-{user}")
        self._session: Session | None = None

    def session(self) -> Session:
        """(On the user's thread.) The user's console Session, opened on first use."""
        if self._session is None:
            self._session = Session(self.url.url, timeout=self.timeout, name=f"web {self.user}")
        return self._session

    def _with_session(self, fn: Callable[[Session], T]) -> T:
        try:
            return fn(self.session())
        except (pika.exceptions.AMQPError, HTCondorConnectionError, ConnectionError):
            # A connection the broker closed while the user was away: once more, on a new one.
            self._drop()
            return fn(self.session())

    def _drop(self) -> None:
        if self._session is not None:
            try:
                self._session.close()
            except Exception:  # (already closed by the broker)
                pass
            self._session = None

    async def run(self, fn: Callable[[Session], T]) -> T:
        """``fn(session)`` on the user's thread; its result or its exception."""
        self.last_used = time.monotonic()
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._with_session, fn)

    def close(self) -> None:
        self._thread.submit(self._drop)
        self._thread.shutdown(wait=False)


class SignIns:
    """The signed-in users by token (the cookie's value)."""

    def __init__(self) -> None:
        self.by_token: dict[str, UserConsole] = {}

    def add(self, console: UserConsole) -> UserConsole:
        self.by_token[console.token] = console
        return console

    def get(self, token: str | None) -> UserConsole | None:
        self.expire()
        found = self.by_token.get(token or "")
        if found is not None:
            found.last_used = time.monotonic()
        return found

    def remove(self, token: str | None) -> None:
        found = self.by_token.pop(token or "", None)
        if found is not None:
            found.close()

    def expire(self) -> None:
        now = time.monotonic()
        for token, console in list(self.by_token.items()):
            if now - console.last_used > SESSION_IDLE:
                self.remove(token)

    def close(self) -> None:
        for token in list(self.by_token):
            self.remove(token)

    def users(self) -> list[str]:
        return sorted({c.user for c in self.by_token.values()})


def describe(exc: BaseException) -> str:
    """A sentence for the page from a failed call."""
    text = str(exc).strip()
    return text or type(exc).__name__
