"""The one start-up path of every daemon (`runner.serve`) and `Config.pick`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gridbus.agent import runner
from gridbus.config import Config, knob

knob("TEST_PICK_SECONDS", 2.5, "a knob of this test")


def test_pick_maps_fields_to_typed_knob_values():
    cfg = Config({"TEST_PICK_SECONDS": "4"}, env={})
    assert cfg.pick(delay="TEST_PICK_SECONDS", interval="UPDATE_INTERVAL") == {"delay": 4.0, "interval": 300.0}


def test_pick_of_an_unknown_knob_names_it():
    with pytest.raises(KeyError, match="NO_SUCH_KNOB_HERE"):
        Config(env={}).pick(x="NO_SUCH_KNOB_HERE")


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What serve() handed to logging and to the loop, without opening a log or a loop."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(runner, "setup_logging", lambda *a, **kw: seen.update(log=(a, kw)))
    monkeypatch.setattr(runner, "run", lambda make, **kw: seen.update(agent=make(), run=kw))
    return seen


def test_serve_logs_in_the_log_knob_rotated_as_configured(started, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GRIDBUS_LOG", str(tmp_path / "logs"))
    monkeypatch.setenv("GRIDBUS_MAX_DAEMON_LOG", "1234")
    monkeypatch.setenv("GRIDBUS_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    runner.serve("collector", "CollectorLog", lambda cfg, args: ("built", cfg.daemon, args.name), ["--name", "x"])
    (name, log_dir, foreground), kw = started["log"]
    assert (name, log_dir, foreground) == ("CollectorLog", str(tmp_path / "logs"), False)
    assert kw == {"max_bytes": 1234, "backups": 2}
    assert started["agent"] == ("built", "collector", "x")


def test_serve_log_dir_option_wins(started, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GRIDBUS_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    runner.serve("startd", "StartLog", lambda cfg, args: None, ["--log-dir", "/tmp/elsewhere", "--foreground"])
    assert started["log"][0] == ("StartLog", "/tmp/elsewhere", True)


def test_serve_ends_with_a_sentence_on_a_bad_file(started, tmp_path: Path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    monkeypatch.setenv("GRIDBUS_CONFIG", str(bad))
    with pytest.raises(SystemExit, match=r"gridbus negotiator: bad configuration: .*not valid TOML"):
        runner.serve("negotiator", "NegotiatorLog", lambda cfg, args: None, [])
    assert started == {}


def test_serve_ends_with_a_sentence_when_the_check_refuses(started, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GRIDBUS_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")

    def check(cfg: Config) -> None:
        raise ValueError("NUM_SLOTS must be 0 or more, not -1")

    with pytest.raises(SystemExit, match="gridbus startd: bad configuration: NUM_SLOTS must be 0 or more"):
        runner.serve("startd", "StartLog", lambda cfg, args: None, [], check=check)
    assert started == {}


def test_startd_main_refuses_a_bad_slot_count(started, monkeypatch, tmp_path: Path):
    from gridbus.agents.startd import main

    monkeypatch.setenv("GRIDBUS_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    monkeypatch.setenv("GRIDBUS_NUM_SLOTS", "-2")
    with pytest.raises(SystemExit, match="gridbus startd: bad configuration: NUM_SLOTS must be 0 or more, not -2"):
        main([])
