"""The test cluster finds the nodes an earlier run left behind by their node name, and never the
machine's own node."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.rabbit_cluster import stray_pids


def test_stray_nodes_are_found_by_their_node_name(tmp_path: Path) -> None:
    beam = tmp_path / "beam.smp"  # a stand-in Erlang VM: what matters is its name and environment
    shutil.copy("/bin/sleep", beam)
    mine = subprocess.Popen([str(beam), "60"], env={"RABBITMQ_NODENAME": "gbctest1@localhost"})
    other = subprocess.Popen([str(beam), "60"], env={"RABBITMQ_NODENAME": "rabbit@localhost"})
    try:
        found = stray_pids({"gbctest1@localhost", "gbctest2@localhost"})
        assert mine.pid in found and other.pid not in found
        assert stray_pids({"gbctest9@localhost"}) == []
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()
