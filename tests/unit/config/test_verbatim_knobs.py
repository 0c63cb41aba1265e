"""A job transform's text keeps its $(MY.attr) and $(var) as written, for every daemon that reads
the file: none expands them as knobs (there is no knob MY.REQUIREMENTS), a reconfig compares them,
and `gridbus config` lists them. JOB_TRANSFORM_NAMES is a knob like any other."""

from __future__ import annotations

from pathlib import Path

import gridbus.agents.schedd.settings  # noqa: F401 - declares JOB_TRANSFORM_NAMES, as the schedd does
from gridbus.config import Config


def test_job_transforms_are_kept_as_written_and_their_names_expand(tmp_path: Path) -> None:
    path = tmp_path / "gridbus.toml"
    text = "SET Requirements = TARGET.HasDocker && $(MY.Requirements)\nSET Site \"$(site)\""
    path.write_text(f'MINE = "Tag"\nJOB_TRANSFORM_NAMES = "$(MINE), Other"\nJOB_TRANSFORM_Tag = \'\'\'{text}\'\'\'\n')
    cfg = Config.load(path, env={})
    assert cfg.get("JOB_TRANSFORM_TAG") == text
    assert cfg.get("JOB_TRANSFORM_NAMES") == ["Tag", "Other"]
    listed = {name: value for name, value, _source in cfg.items()}
    assert listed["JOB_TRANSFORM_TAG"] == text
    path.write_text('JOB_TRANSFORM_Tag = "SET X $(MY.Y)"\n')
    assert "JOB_TRANSFORM_TAG" in cfg.changed(Config.load(path, env={}))
