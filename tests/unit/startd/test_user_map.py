"""USER_MAP: broker users to Unix accounts on an execute node (HTCondor's user map)."""

from __future__ import annotations

import os

import pytest

from gridbus.agents.startd.accounts import RunAsPolicy, RunAsRefused, UserMap
from gridbus.agents.startd.settings import StartdSettings
from gridbus.config import Config


def test_a_user_not_listed_keeps_its_name_and_star_maps_the_rest():
    assert UserMap().account_name("alice") == "alice"  # `broker setup --user alice` is the account alice
    m = UserMap.parse(["alice=asmith", "*=nobody"])
    assert (m.account_name("alice"), m.account_name("bob")) == ("asmith", "nobody")
    assert UserMap.parse("guest=nobody, bob=bsmith").account_name("guest") == "nobody"
    with pytest.raises(ValueError, match="broker_user=unix_account"):
        UserMap.parse(["alice"])


def test_the_knob_reaches_the_startds_settings():
    cfg = Config.load(env={"GRIDBUS_USER_MAP": "guest=nobody,*=daemon"}, daemon="startd")
    assert UserMap.parse(StartdSettings.from_config(cfg).user_map).account_name("x") == "daemon"


@pytest.mark.skipif(os.geteuid() != 0, reason="the map applies to a startd running as root")
def test_a_root_startd_runs_the_mapped_account_and_names_the_map_when_it_cannot():
    policy = RunAsPolicy(user_map=UserMap.parse(["guest=nobody"]))
    assert policy.account_for("guest").name == "nobody"
    with pytest.raises(RunAsRefused, match="maps \\(USER_MAP\\) to 'no-such-account-xyz'"):
        RunAsPolicy(user_map=UserMap.parse(["guest=no-such-account-xyz"])).account_for("guest")
    # Mapped to root, a job still needs STARTER_ALLOW_ROOT_JOBS.
    with pytest.raises(RunAsRefused):
        RunAsPolicy(user_map=UserMap.parse(["guest=root"])).account_for("guest")


@pytest.mark.skipif(os.geteuid() != 0, reason="the policy applies to a daemon running as root")
def test_root_jobs_allowed_promote_only_owners_that_map_to_root():
    allow = RunAsPolicy(allow_root_jobs=True)
    assert allow.account_for("root").uid == 0
    assert RunAsPolicy(allow_root_jobs=True, user_map=UserMap.parse(["guest=root"])).account_for("guest").uid == 0
    # An owner with no account is held, whatever STARTER_ALLOW_ROOT_JOBS says...
    for policy in (allow, RunAsPolicy(allow_root_jobs=True, allow_runas_owner=False)):
        with pytest.raises(RunAsRefused, match="'mallory' has no account|STARTER_ALLOW_RUNAS_OWNER"):
            policy.account_for("mallory")
    with pytest.raises(RunAsRefused, match="no Owner"):
        allow.account_for(None)
    # ... or runs as STARTER_UNPRIVILEGED_USER, never root, even when that knob names root.
    assert RunAsPolicy(allow_root_jobs=True, unprivileged_user="nobody").account_for("mallory").name == "nobody"
    with pytest.raises(RunAsRefused, match="never runs as root"):
        RunAsPolicy(allow_root_jobs=True, unprivileged_user="root").account_for("mallory")
