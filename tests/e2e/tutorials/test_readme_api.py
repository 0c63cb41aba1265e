"""The README's htcondor2-names example runs as written (in a vhost of its own)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.usefixtures("env_of_module", "workdir")


def test_the_readme_example_runs(capsys):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("The rest of htcondor2's top level"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("/my-pool/log/MasterLog 300.0") and lines[1] == "300"
    assert lines[2] == "/bin/true"
