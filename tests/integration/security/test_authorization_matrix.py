"""The authorization matrix, generated from schemas/: every method of every agent, called by two
plain users (alice and bob, accounts made with `gridbus broker setup`) with valid arguments, on
an object of their own and on one of the other user; each answer must agree with the method's
declared rule (status 6 exactly where the rule refuses the caller).

A method the schemas declare and this table gives no valid arguments for fails the test, so a new
method cannot skip the matrix (and one without a rule fails tests/unit/schema).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gridbus.bus import BrokerURL
from gridbus.classad import ExprTree
from gridbus.console import Session
from gridbus.mgmt import Management
from gridbus.schema import builtin
from tests.e2e.conftest import STATIC_STARTD
from tests.e2e.pool import Pool, wait_for

pytestmark = pytest.mark.broker

ADDRESSES = {"collector": "collector@c", "negotiator": "negotiator@n", "schedd": "schedd@s",
             "startd": "startd@a", "master": "master@m"}


@dataclass
class Cell:
    user: str  # the caller
    own_job: str  # a held job of the caller's, made for this cell (the cell may remove it)
    other_job: str  # a held job of the other user's, which nobody but its owner may change
    target: str  # "own" or "other": whose job the call names


# Valid arguments per (class, method), from the cell. Claim ids are made up: a daemon method
# refuses a plain user before it looks at them.
def _ids(c: Cell) -> list[str]:
    return [c.own_job if c.target == "own" else c.other_job]


def _job_ad(c: Cell) -> dict[str, Any]:
    return {"Cmd": "/bin/true", "Iwd": "/tmp", "JobUniverse": 5, "Requirements": ExprTree("true"),
            "RequestCpus": 1, "RequestMemory": 16, "JobStatus": 5, "HoldReason": "matrix"}


_ACTION = lambda c: {"Ids": _ids(c), "Reason": "matrix"}  # noqa: E731
VALID: dict[tuple[str, str], Callable[[Cell], dict[str, Any]]] = {
    ("collector", "Query"): lambda c: {"AdTypes": ["Machine"], "Limit": 1},
    ("collector", "Locate"): lambda c: {"DaemonType": "Schedd"},
    ("collector", "Invalidate"): lambda c: {"AdType": "Machine", "Names": ["nothing@nowhere"]},
    ("daemon", "RemoteParam"): lambda c: {"Names": ["UPDATE_INTERVAL"]},
    ("daemon", "SetParam"): lambda c: {"Name": "MATRIX_KNOB", "Value": "1"},
    ("daemon", "Advertise"): lambda c: {},
    ("master", "Start"): lambda c: {"Daemon": "COLLECTOR"},
    ("master", "Stop"): lambda c: {"Daemon": "COLLECTOR"},
    ("master", "Restart"): lambda c: {"Daemon": "COLLECTOR"},
    ("master", "Reconfig"): lambda c: {},
    ("master", "Off"): lambda c: {},
    ("negotiator", "GetPriorities"): lambda c: {},
    ("negotiator", "SetPriority"): lambda c: {"Name": c.user, "Priority": 1.0},
    ("negotiator", "SetPriorityFactor"): lambda c: {"Name": c.user, "PriorityFactor": 1.0},
    ("negotiator", "SetUsage"): lambda c: {"Name": c.user, "Usage": 0.0},
    ("negotiator", "GetLimits"): lambda c: {},
    ("negotiator", "SetLimit"): lambda c: {"Name": "matrix", "Max": 1},
    ("negotiator", "Reschedule"): lambda c: {},
    ("negotiator", "Analyze"): lambda c: {"Job": {**_job_ad(c), "Owner": c.user}},
    ("scheduler", "Submit"): lambda c: {"Ad": _job_ad(c), "Count": 1},
    ("scheduler", "NewCluster"): lambda c: {},
    ("scheduler", "Query"): lambda c: {"Constraint": "true", "Limit": 5},
    ("scheduler", "History"): lambda c: {"Limit": 5},
    ("scheduler", "Hold"): _ACTION,
    ("scheduler", "Release"): _ACTION,
    ("scheduler", "Remove"): _ACTION,
    ("scheduler", "Suspend"): _ACTION,
    ("scheduler", "Continue"): _ACTION,
    ("scheduler", "Vacate"): _ACTION,
    ("scheduler", "VacateFast"): _ACTION,
    ("scheduler", "SetAttribute"): lambda c: {"Ids": _ids(c), "Name": "MatrixAttr", "Value": 1},
    ("scheduler", "GetAd"): lambda c: {"Id": _ids(c)[0]},
    ("scheduler", "Fetch"): lambda c: {"Id": _ids(c)[0], "File": "Out"},
    ("scheduler", "GetResourceRequests"): lambda c: {"Owner": c.user},
    ("scheduler", "Match"): lambda c: {"Matches": []},
    ("scheduler", "JobReports"): lambda c: {"Reports": []},
    ("scheduler", "SpoolInput"): lambda c: {"Id": _ids(c)[0], "Name": "in.txt", "Data": b"x"},
    ("scheduler", "SpoolDone"): lambda c: {"Id": _ids(c)[0]},
    ("scheduler", "ListSpool"): lambda c: {"Id": _ids(c)[0]},
    ("scheduler", "RetrieveSpool"): lambda c: {"Id": _ids(c)[0], "Name": "out.txt"},
    ("scheduler", "RetrieveDone"): lambda c: {"Id": _ids(c)[0]},
    ("scheduler", "OpenTransfer"): lambda c: {"ClaimId": "forged#1", "ClusterId": int(_ids(c)[0].split(".")[0]),
                                              "ProcId": 0, "Direction": "in"},
    ("job", "Hold"): lambda c: {"Reason": "matrix"},
    ("job", "Release"): lambda c: {"Reason": "matrix"},
    ("job", "Remove"): lambda c: {"Reason": "matrix"},
    ("job", "SetAttribute"): lambda c: {"Name": "MatrixAttr", "Value": 2},
    ("job", "GetAd"): lambda c: {},
    ("job", "Fetch"): lambda c: {"File": "Out"},
    ("startd", "RequestClaim"): lambda c: {"ClaimId": "forged#1", "JobAd": _job_ad(c), "Schedd": "schedd@s"},
    ("startd", "ActivateClaims"): lambda c: {"Activations": [{"ClaimId": "forged#1", "JobAd": _job_ad(c)}]},
    ("startd", "ActivateClaim"): lambda c: {"ClaimId": "forged#1", "JobAd": _job_ad(c)},
    ("startd", "DeactivateClaim"): lambda c: {"ClaimId": "forged#1"},
    ("startd", "WithdrawActivation"): lambda c: {"ClaimId": "forged#1", "ClusterId": 1, "ProcId": 0},
    ("startd", "SuspendClaim"): lambda c: {"ClaimId": "forged#1"},
    ("startd", "ContinueClaim"): lambda c: {"ClaimId": "forged#1"},
    ("startd", "ReleaseClaim"): lambda c: {"ClaimId": "forged#1"},
    ("startd", "Alive"): lambda c: {"ClaimIds": ["forged#1"]},
    ("startd", "Drain"): lambda c: {"HowFast": "graceful"},
    ("startd", "CancelDrain"): lambda c: {},
    ("startd", "Vacate"): lambda c: {},
    ("startd", "GetSlots"): lambda c: {},
}


def expected_refusal(rule: str, target: str) -> bool:
    """Whether a plain user (no super user, no administrator) is refused under ``rule``."""
    return {"anyone": False, "owner": target == "other", "superuser": True, "admin": True, "daemon": True}[rule]


def _setup_accounts(broker_url: BrokerURL, vhost: str, names: dict[str, str], cwd: Path) -> dict[str, str]:
    gridbus = str(Path(sys.executable).with_name("gridbus"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIDBUS_")}
    cmd = [gridbus, "--pool", broker_url.with_vhost(vhost).url, "broker", "setup",
           "--daemon-user", names["daemon"], "--daemon-password", "matrix-daemon",
           "--user", f"{names['alice']}:matrix-alice", "--user", f"{names['bob']}:matrix-bob"]
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return {"daemon": "matrix-daemon", "alice": "matrix-alice", "bob": "matrix-bob"}


def test_every_method_answers_each_user_as_its_rule_says(
    mgmt: Management, broker_url: BrokerURL, vhost: str, tmp_path: Path
):
    schema = builtin()
    missing = [f"{c.name}.{m}" for c in schema.classes.values() for m in c.methods if (c.name, m) not in VALID]
    assert not missing, f"the matrix has no valid arguments for {missing}: add them to VALID"

    tag = uuid.uuid4().hex[:8]
    names = {"daemon": f"gbm-{tag}-daemon", "alice": f"gbm-{tag}-alice", "bob": f"gbm-{tag}-bob"}
    pool = None
    try:
        passwords = _setup_accounts(broker_url, vhost, names, tmp_path)
        urls = {k: broker_url.with_vhost(vhost).with_credentials(names[k], passwords[k]).url for k in names}
        pool = Pool(urls["daemon"], tmp_path / "pool")
        pool.start("collector", "c")
        pool.start("negotiator", "n")
        pool.start("schedd", "s")
        pool.start("startd", "a", **STATIC_STARTD)
        pool.start("master", "m", GRIDBUS_DAEMON_LIST="MASTER")
        pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
        pool.wait_slots(4)
        sessions = {u: Session(urls[u], timeout=20) for u in ("alice", "bob")}

        def held_job(user: str) -> str:
            r = sessions[user].call("schedd@s", "Submit", {"Ad": _job_ad(None), "Count": 1}).check("Submit")  # type: ignore[arg-type]
            return f"{r.ClusterId}.0"

        keep = {u: held_job(u) for u in sessions}  # the job the other user tries to touch
        rows, wrong = [], []
        for cls in schema.classes.values():
            agents = list(ADDRESSES.values()) if cls.name == "daemon" else [ADDRESSES[cls.agent]]
            for m in cls.methods.values():
                for user, other in (("alice", "bob"), ("bob", "alice")):
                    for target in ("own", "other"):
                        cell = Cell(names[user], held_job(user) if m.rule == "owner" else keep[user], keep[other], target)
                        for address in agents:
                            obj = (cell.own_job if target == "own" else cell.other_job) if cls.name == "job" else None
                            r = sessions[user].call(address, m.name, VALID[(cls.name, m.name)](cell), obj=obj, timeout=20)
                            refused = r.status == 6
                            want = expected_refusal(m.rule, target)
                            rows.append((cls.name, m.name, user, target, address, r.status))
                            if refused != want:
                                wrong.append(f"{user} {cls.name}.{m.name} on {target} at {address}: "
                                             f"status {r.status} ({r.text[:120]}), rule {m.rule}")
                            elif refused and m.rule != "owner":
                                # The framework's sentence: who, what, why.
                                assert r.text.startswith(f"Permission denied: user {names[user]} may not call {m.name}"), r.text
        for s in sessions.values():
            s.close()
        assert not wrong, f"{len(wrong)} of {len(rows)} cells disagree with the schema:\n" + "\n".join(wrong)
        assert len(rows) >= 4 * sum(len(c.methods) for c in schema.classes.values())
    finally:
        if pool is not None:
            pool.stop()
        for name in names.values():
            try:
                mgmt.delete_user(name)
            except Exception:
                pass


@pytest.mark.skipif(os.geteuid() != 0, reason="STARTER_ALLOW_ROOT_JOBS matters only to a pool running as root")
@pytest.mark.parametrize("unprivileged", ["nobody", ""])
def test_with_root_jobs_allowed_an_owner_without_an_account_never_gets_root_s_access(
    mgmt: Management, broker_url: BrokerURL, vhost: str, tmp_path: Path, unprivileged: str
):
    """The matrix's rows with STARTER_ALLOW_ROOT_JOBS = true: the broker user alice has no Unix
    account, so her job, her Fetch, her user log and her transfer act as STARTER_UNPRIVILEGED_USER
    (nobody), never as root, though root's own jobs may run as root; with no
    STARTER_UNPRIVILEGED_USER, they are held or refused."""
    import pwd
    import shutil
    import tempfile

    tag = uuid.uuid4().hex[:8]
    names = {"daemon": f"gbm-{tag}-daemon", "alice": f"gbm-{tag}-alice", "bob": f"gbm-{tag}-bob"}
    nobody = pwd.getpwnam("nobody")
    # Where nobody may look (tmp_path's parents are root's alone); a root-only secret and log in it.
    d = Path(tempfile.mkdtemp(prefix="gridbus-rootjobs-", dir="/tmp"))
    pool = None
    try:
        os.chmod(d, 0o755)
        out = d / "out"
        out.mkdir(mode=0o777)
        os.chmod(out, 0o777)
        secret, log = d / "secret", d / "root.log"
        secret.write_text("root's secret\n")
        log.write_text("root's log\n")
        for f in (secret, log):
            os.chmod(f, 0o600)
        passwords = _setup_accounts(broker_url, vhost, names, tmp_path)
        urls = {k: broker_url.with_vhost(vhost).with_credentials(names[k], passwords[k]).url for k in names}
        # No USER_MAP (the e2e pools map every owner to root): alice is herself, with no account.
        as_root = {"GRIDBUS_STARTER_ALLOW_ROOT_JOBS": "true", "GRIDBUS_USER_MAP": "",
                   "GRIDBUS_STARTER_UNPRIVILEGED_USER": unprivileged}
        pool = Pool(urls["daemon"], tmp_path / "pool")
        pool.start("collector", "c")
        pool.start("negotiator", "n")
        pool.start("schedd", "s", **as_root)
        pool.start("startd", "a", **STATIC_STARTD, **as_root, GRIDBUS_EXECUTE=str(d / "execute"))
        pool.wait_serving("collector@c", "schedd@s", "negotiator@n")
        pool.wait_slots(4)
        alice = Session(urls["alice"], timeout=20)

        def submit(**attrs: Any) -> str:
            ad = {"Cmd": "/bin/sh", "Iwd": str(out), "JobUniverse": 5, "Requirements": ExprTree("true"),
                  "RequestCpus": 1, "RequestMemory": 16, **attrs}
            return f"{alice.call('schedd@s', 'Submit', {'Ad': ad, 'Count': 1}).check('Submit').ClusterId}.0"

        def settled(job: str) -> dict[str, Any]:
            def look() -> dict[str, Any] | None:
                cluster = job.split(".")[0]
                held = [j for j in pool.jobs("schedd@s", f"ClusterId == {cluster}") if j.get("JobStatus") == 5]
                return held[0] if held else next(iter(pool.history("schedd@s", f"ClusterId == {cluster}")), None)
            return wait_for(f"job {job} to complete or be held", look, 60)

        rows: list[tuple[str, bool]] = []
        # The job itself: it runs as nobody, and cannot read root's file.
        ran = submit(Arguments="-c 'id -u; cat ../secret'", Out="job.out", Err="job.err")
        # The user log: it is written as nobody, so a root-only log holds the job (22).
        # (It waits in the queue, matching nothing: a job that ran and ended first is not held.)
        logged = submit(Arguments="-c true", UserLog=str(log), Requirements=ExprTree("false"))
        # Transfer: a root-only input is never sent (13).
        sent = submit(Arguments="-c true", ShouldTransferFiles="YES", WhenToTransferOutput="ON_EXIT",
                      TransferInput=str(secret), Out="t.out", Err="t.err")
        # Fetch: the Out/Err a job named are read as nobody.
        fetched = submit(Arguments="-c true", Out=str(secret), Err=str(secret))

        job = settled(ran)
        said = [(out / f).read_text() if (out / f).exists() else "" for f in ("job.out", "job.err")]
        why = f"{job.get('JobStatus')} {job.get('HoldReasonCode')} {job.get('HoldReason')} {said}"
        if unprivileged:
            rows.append((f"job {why}", job.get("JobStatus") == 4
                         and said[0].split() == [str(nobody.pw_uid)] and "Permission denied" in said[1]))
        else:  # no account to run it as: held, never run
            rows.append((f"job {why}", job.get("JobStatus") == 5 and job.get("HoldReasonCode") == 23
                         and said == ["", ""]))
        job = settled(logged)
        rows.append((f"user log {job}", job.get("JobStatus") == 5 and job.get("HoldReasonCode") == 22))
        job = settled(sent)
        rows.append((f"transfer {job}", job.get("JobStatus") == 5 and job.get("HoldReasonCode") in (13, 23)
                     and ("Permission denied" in str(job.get("HoldReason")) or not unprivileged)))
        for which in ("Out", "Err"):
            r = alice.call("schedd@s", "Fetch", {"Id": fetched, "File": which}, timeout=20)
            rows.append((f"Fetch {which} {r.status} {r.text[:200]}", r.status != 0
                         and ("Permission denied" in r.text or not unprivileged)
                         and "root's" not in r.text and not r.outArgs.get("Data")))
        alice.close()
        assert secret.read_text() == "root's secret\n" and log.read_text() == "root's log\n"
        assert all(ok for _, ok in rows), [what for what, ok in rows if not ok]
    finally:
        if pool is not None:
            pool.stop()
        shutil.rmtree(d, ignore_errors=True)
        for name in names.values():
            try:
                mgmt.delete_user(name)
            except Exception:
                pass
