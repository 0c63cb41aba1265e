"""Type-check gridbus as it is installed: `gridbus`, with `agents/` as `gridbus.agents` and
`console/` as `gridbus.console` (pyproject's package-dir mapping).

mypy follows neither that mapping nor setuptools' editable finder, so it reads a tree of symlinks
laid out as the installed package (build/typecheck/gridbus) and is given that tree's root as its
path. Paths in its messages are that tree's (gridbus/agents/... is agents/...). `make lint` runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "typecheck"
MAPPED = {"agents": "agents", "console": "console", "schemas": "schemas"}


def lay_out_tree() -> Path:
    pkg = TREE / "gridbus"
    pkg.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in (ROOT / "gridbus").iterdir() if p.name != "__pycache__"}
    wanted.update({name: ROOT / src for name, src in MAPPED.items()})
    for entry in pkg.iterdir():
        if entry.name not in wanted or not entry.is_symlink() or entry.resolve() != wanted[entry.name]:
            entry.unlink()
    for name, target in wanted.items():
        link = pkg / name
        if not link.is_symlink():
            link.symlink_to(target)
    return TREE


def main() -> int:
    tree = lay_out_tree()
    env = {**os.environ, "MYPYPATH": str(tree)}
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "-p", "gridbus", *sys.argv[1:]]
    return subprocess.call(cmd, cwd=tree, env=env)


if __name__ == "__main__":
    sys.exit(main())
