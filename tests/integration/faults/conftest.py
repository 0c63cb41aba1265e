"""Fixtures of the network fault tests: a cut-able link per test, removed in a finally."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.faults.netns import NetnsLink, unavailable


@pytest.fixture
def link() -> Iterator[NetnsLink]:
    """A namespace, a veth pair on a private /30 and a forwarder to the broker; always removed."""
    why = unavailable()
    if why:
        pytest.skip(why)
    net = NetnsLink()
    try:
        net.open()
        yield net
    finally:
        net.close()
