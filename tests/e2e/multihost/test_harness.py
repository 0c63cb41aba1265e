"""The harness's own housekeeping: what a run killed half way left behind is removed by the next."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import wait_for
from tests.multihost import remove_stale, unavailable


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.split()}


def _pids_in(ns: str) -> list[str]:
    return subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()


def test_a_dead_runs_namespaces_go_and_a_live_runs_stay():
    why = unavailable()
    if why:
        pytest.skip(why)
    dead_pid = int(open("/proc/sys/kernel/pid_max").read())  # above any pid in use
    dead, live = f"gbt-m{dead_pid}x0", f"gbt-m{os.getpid()}x99"
    sleeper: subprocess.Popen | None = None
    try:
        for ns in (dead, live):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "link", "add", f"gbhm{dead_pid}x0", "type", "veth", "peer", "name", f"gbnm{dead_pid}x0",
                        "netns", dead], check=True)
        # A daemon the killed run left in its namespace, holding it.
        sleeper = subprocess.Popen(["ip", "netns", "exec", dead, "sleep", "300"])
        # Inside once `ip netns exec` has entered the namespace (it then runs sleep as itself): a
        # namespace removed before that made ip fail (status 255), as a loaded CI run saw.
        wait_for(lambda: str(sleeper.pid) in _pids_in(dead), 10, f"the sleeper to be in {dead}")
        removed = remove_stale()
        assert dead in removed and live not in removed, removed
        assert dead not in _netns() and live in _netns()
        assert sleeper.wait(10) == -9
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        assert f"gbhm{dead_pid}x0" not in links
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
        for ns in (dead, live):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
