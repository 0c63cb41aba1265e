"""The descriptors the starter waits on for each job (its spawn's pipe, then its pidfd), watched as
one reader of the event loop: an epoll set of the starter's own.

Every job adds two descriptors and drops them again a moment later. Through the loop's
``add_reader``/``remove_reader`` each of the four steps is a selector key, a handle and an
``epoll_ctl``; here a descriptor is added with one ``epoll_ctl`` (one-shot: it fires once) and
never removed by hand, since the kernel drops a descriptor from the set when it is closed, and
the starter closes both once they have fired.
"""

from __future__ import annotations

import asyncio
import logging
import select
from collections.abc import Callable
from typing import Any

log = logging.getLogger("gridbus.startd.readyfds")

DISPATCH_ROUNDS = 4  # polls of the set per turn of the loop, while it has something ready


class ReadyFds:
    """Call ``callback(*args)`` once when a descriptor is readable, on the loop that watches the set."""

    def __init__(self) -> None:
        self._epoll: select.epoll | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._calls: dict[int, tuple[Callable[..., Any], tuple[Any, ...]]] = {}

    def watch(self, fd: int, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)`` once ``fd`` is readable. The caller closes ``fd`` once it has
        fired (or calls `forget` before it closes it otherwise)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._bind(loop)
        assert self._epoll is not None
        self._epoll.register(fd, select.EPOLLIN | select.EPOLLONESHOT)
        self._calls[fd] = (callback, args)

    def forget(self, fd: int) -> None:
        """Stop waiting for ``fd`` (it stays open, or is closed next)."""
        if self._calls.pop(fd, None) is not None and self._epoll is not None:
            try:
                self._epoll.unregister(fd)
            except (FileNotFoundError, OSError):  # closed already: the kernel dropped it
                pass

    def close(self) -> None:
        if self._loop is not None and self._epoll is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._epoll.fileno())
        if self._epoll is not None:
            self._epoll.close()
        self._epoll, self._loop = None, None
        self._calls.clear()

    def __len__(self) -> int:
        return len(self._calls)

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """A new set on ``loop`` (the first watch, or the starter used from another loop, as tests
        do: what the old loop waited for is not carried over)."""
        self.close()
        self._epoll = select.epoll()
        self._loop = loop
        loop.add_reader(self._epoll.fileno(), self._dispatch)

    def _dispatch(self) -> None:
        # What became ready while the callbacks ran (a job's exit or exec takes tens of
        # microseconds to handle) is taken in the same turn of the loop, a few rounds at most so
        # that the loop's other work waits no longer: a turn of the loop costs more than a round.
        epoll = self._epoll
        assert epoll is not None
        for _ in range(DISPATCH_ROUNDS):
            ready = epoll.poll(0)
            if not ready:
                return
            for fd, _events in ready:
                call = self._calls.pop(fd, None)
                if call is not None:  # (None: forgotten meanwhile)
                    callback, args = call
                    try:
                        callback(*args)
                    except Exception:  # the others of this batch fired once and will not fire again
                        log.exception("the callback of descriptor %d failed", fd)
            if self._epoll is not epoll:  # (closed by a callback)
                return
