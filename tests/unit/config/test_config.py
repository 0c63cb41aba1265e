"""gridbus.config: precedence, types, sections, macros, sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridbus import config as config_mod
from gridbus.config import Config, ConfigError, knob, truth

# Knobs only these tests use; declared once at import like a daemon module would.
knob("TEST_CFG_FLOAT", 1.5, "a float knob for the tests")
knob("TEST_CFG_INT", 3, "an int knob for the tests")
knob("TEST_CFG_BOOL", False, "a bool knob for the tests")
knob("TEST_CFG_LIST", ["a"], "a list knob for the tests")
knob("TEST_CFG_STR", "x", "a str knob for the tests")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gridbus.toml"
    path.write_text(text)
    return path


def test_default_when_nothing_sets_it(tmp_path: Path) -> None:
    cfg = Config.load(write(tmp_path, ""), env={})
    assert cfg.get("UPDATE_INTERVAL") == 300.0
    assert isinstance(cfg.get("UPDATE_INTERVAL"), float)
    assert cfg.source("UPDATE_INTERVAL") == "default"


def test_file_beats_default_and_env_beats_file(tmp_path: Path) -> None:
    path = write(tmp_path, "UPDATE_INTERVAL = 1\n")
    cfg = Config.load(path, env={})
    assert cfg.get("UPDATE_INTERVAL") == 1.0 and isinstance(cfg["UPDATE_INTERVAL"], float)
    assert cfg.source("UPDATE_INTERVAL") == f"file {path.resolve()}"
    cfg = Config.load(path, env={"GRIDBUS_UPDATE_INTERVAL": "2.5"})
    assert cfg.get("UPDATE_INTERVAL") == 2.5
    assert cfg.source("UPDATE_INTERVAL") == "env GRIDBUS_UPDATE_INTERVAL"


def test_names_are_case_insensitive(tmp_path: Path) -> None:
    cfg = Config.load(write(tmp_path, "update_interval = 7\n"), env={})
    assert cfg.get("Update_Interval") == 7.0
    assert cfg["update_interval"] == 7.0
    assert "UPDATE_INTERVAL" in [name for name, _, _ in cfg.items()]


def test_daemon_section_takes_precedence_for_that_daemon_only(tmp_path: Path) -> None:
    path = write(tmp_path, "UPDATE_INTERVAL = 10\n[schedd]\nupdate_interval = 2\n")
    assert Config.load(path, daemon="schedd", env={}).get("UPDATE_INTERVAL") == 2.0
    assert Config.load(path, daemon="schedd", env={}).source("UPDATE_INTERVAL").endswith("[schedd]")
    assert Config.load(path, daemon="startd", env={}).get("UPDATE_INTERVAL") == 10.0
    assert Config.load(path, env={}).get("UPDATE_INTERVAL") == 10.0
    # The environment still wins over the section.
    env = {"GRIDBUS_UPDATE_INTERVAL": "5"}
    assert Config.load(path, daemon="schedd", env=env).get("UPDATE_INTERVAL") == 5.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("1", True), ("yes", True), ("YES", True), ("on", True), ("T", True), ("y", True),
     ("false", False), ("0", False), ("no", False), ("off", False), ("f", False), ("N", False)],
)
def test_bools_from_env(text: str, expected: bool) -> None:
    assert Config(env={"GRIDBUS_TEST_CFG_BOOL": text}).get("TEST_CFG_BOOL") is expected


def test_bad_bool_names_the_knob_and_the_source() -> None:
    with pytest.raises(ConfigError, match=r"TEST_CFG_BOOL from env GRIDBUS_TEST_CFG_BOOL: 'maybe'"):
        Config(env={"GRIDBUS_TEST_CFG_BOOL": "maybe"}).get("TEST_CFG_BOOL")


def test_truth_is_every_true_false_knobs_reader() -> None:
    assert truth(True, "K") is True and truth(0, "K") is False and truth(" Yes ", "K") is True
    for bad in ("maybe", 2, "", None, 1.5):
        with pytest.raises(ConfigError, match=r"^K: .* is not a valid bool \(expected true or false"):
            truth(bad, "K")


def test_lists_from_env_are_comma_separated_and_from_toml_are_lists(tmp_path: Path) -> None:
    assert Config(env={"GRIDBUS_TEST_CFG_LIST": "alice, bob,,carol"}).get("TEST_CFG_LIST") == ["alice", "bob", "carol"]
    cfg = Config.load(write(tmp_path, 'TEST_CFG_LIST = ["x", "y"]\n'), env={})
    assert cfg.get("TEST_CFG_LIST") == ["x", "y"]
    cfg = Config.load(write(tmp_path, 'TEST_CFG_LIST = "x, y"\n'), env={})
    assert cfg.get("TEST_CFG_LIST") == ["x", "y"]


def test_int_knob_refuses_a_fraction_and_garbage(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TEST_CFG_INT"):
        Config.load(write(tmp_path, "TEST_CFG_INT = 1.5\n"), env={}).get("TEST_CFG_INT")
    with pytest.raises(ConfigError, match="not a valid int"):
        Config(env={"GRIDBUS_TEST_CFG_INT": "three"}).get("TEST_CFG_INT")
    assert Config(env={"GRIDBUS_TEST_CFG_INT": " 42 "}).get("TEST_CFG_INT") == 42


def test_float_knob_refuses_bool_and_str_knob_refuses_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        Config.load(write(tmp_path, "TEST_CFG_FLOAT = true\n"), env={}).get("TEST_CFG_FLOAT")
    with pytest.raises(ConfigError):
        Config({"TEST_CFG_STR": [1, 2]}, env={}).get("TEST_CFG_STR")


def test_macros_expand_and_follow_local_dir(tmp_path: Path) -> None:
    cfg = Config(env={"GRIDBUS_LOCAL_DIR": str(tmp_path)})
    assert cfg.get("SPOOL") == f"{tmp_path}/spool"
    assert cfg.get("LOG") == f"{tmp_path}/log"
    assert cfg.source("LOG") == "default"
    assert cfg.source("LOCAL_DIR") == "env GRIDBUS_LOCAL_DIR"


def test_a_macro_cycle_is_an_error_not_a_hang() -> None:
    cfg = Config({"TEST_CFG_STR": "$(LOCAL_DIR)", "LOCAL_DIR": "$(TEST_CFG_STR)/x"}, env={})
    with pytest.raises(ConfigError, match="refers to itself"):
        cfg.get("TEST_CFG_STR")


def test_undeclared_knob_from_file_is_kept_raw_and_unknown_raises(tmp_path: Path) -> None:
    cfg = Config.load(write(tmp_path, "SOMETHING_LOCAL = 12\n"), env={})
    assert cfg.get("something_local") == 12
    with pytest.raises(KeyError, match="NO_SUCH_KNOB"):
        cfg.get("NO_SUCH_KNOB")
    assert cfg.get("NO_SUCH_KNOB", None) is None
    assert "NO_SUCH_KNOB" not in cfg and "SOMETHING_LOCAL" in cfg


def test_items_lists_value_and_source_of_every_declared_knob(tmp_path: Path) -> None:
    path = write(tmp_path, "NEGOTIATOR_INTERVAL = 20\n")
    rows = {name: (value, source) for name, value, source in Config.load(path, env={}).items()}
    for name in ("GRIDBUS_URL", "UPDATE_INTERVAL", "CLASSAD_LIFETIME", "LOG", "SPOOL", "LOCAL_DIR",
                 "EXECUTE", "DAEMON_LIST", "NEGOTIATOR_INTERVAL", "START", "NUM_SLOTS", "SLOT_TYPE_1",
                 "CLAIM_WORKLIFE", "QUEUE_SUPER_USERS", "SUBMIT_REQUIREMENT_NAMES",
                 "COLLECTOR_PRIVATE_READERS", "MAX_DAEMON_LOG"):
        assert name in rows, name
    assert rows["NEGOTIATOR_INTERVAL"] == (20.0, f"file {path.resolve()}")


def test_file_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = write(tmp_path, "UPDATE_INTERVAL = 3\n")
    monkeypatch.chdir(tmp_path)
    # ./gridbus.toml is found with no path and no GRIDBUS_CONFIG.
    assert Config.load(env={}).get("UPDATE_INTERVAL") == 3.0
    other = tmp_path / "other.toml"
    other.write_text("UPDATE_INTERVAL = 4\n")
    assert Config.load(env={"GRIDBUS_CONFIG": str(other)}).get("UPDATE_INTERVAL") == 4.0
    # An explicit path beats GRIDBUS_CONFIG.
    assert Config.load(named, env={"GRIDBUS_CONFIG": str(other)}).get("UPDATE_INTERVAL") == 3.0


def test_missing_and_invalid_files_say_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Config.load(tmp_path / "nope.toml", env={})
    with pytest.raises(ConfigError, match="not valid TOML"):
        Config.load(write(tmp_path, "UPDATE_INTERVAL = = 1\n"), env={})


def test_url_and_env_name_of_gridbus_url() -> None:
    assert Config(env={"GRIDBUS_URL": "amqp://u:p@h:1/v"}).url() == "amqp://u:p@h:1/v"
    assert config_mod.env_name("GRIDBUS_URL") == "GRIDBUS_URL"
    assert config_mod.env_name("spool") == "GRIDBUS_SPOOL"


def test_redeclaring_a_knob_is_harmless_only_with_the_same_type_and_default() -> None:
    assert knob("TEST_CFG_INT", 3, "again, as another module reads it").default == 3
    # Another default would make the value depend on which module was imported first.
    with pytest.raises(ValueError, match="already declared with default 3, not 99"):
        knob("TEST_CFG_INT", 99, "again")
    with pytest.raises(ValueError, match="already declared as int"):
        knob("TEST_CFG_INT", "3", "as a string")
    with pytest.raises(ValueError, match="must be letters"):
        knob("bad name", 1, "spaces are not allowed")


def test_set_and_changed() -> None:
    a = Config(env={})
    b = Config(env={"GRIDBUS_UPDATE_INTERVAL": "9"})
    assert a.changed(b) == ["UPDATE_INTERVAL"]
    a.set("update_interval", "9")
    assert a.source("UPDATE_INTERVAL") == "set" and a.changed(b) == []


def test_an_empty_gridbus_url_is_no_url(tmp_path: Path) -> None:
    """``GRIDBUS_URL= gridbus pool up``: the file's URL (or the default) serves, as the console
    takes it, not a URL with no host that a daemon would retry for ever."""
    path = write(tmp_path, 'GRIDBUS_URL = "amqp://u:p@10.0.0.1:5672/v"\n')
    assert Config.load(path, env={"GRIDBUS_URL": ""}).url() == "amqp://u:p@10.0.0.1:5672/v"
    assert Config.load(path, env={"GRIDBUS_URL": "amqp://x@h/"}).url() == "amqp://x@h/"
