"""Preemption: claimed slots a request may take from the job running there, as HTCondor's negotiator
weighs them.

A claimed static slot advertises (privately) its preempting claim id (``PreemptingClaimId``,
beside the claim's own ``ClaimId``). A request may take it:

- by the startd's RANK: the slot ranks the request's job above the one it runs
  (``Rank > CurrentRank``); or
- by user priority: the slot ranks the job at least as well, the request's submitter has a
  better (smaller) effective priority than the running job's (``RemoteUserPrio >
  SubmitterUserPrio``), and PREEMPTION_REQUIREMENTS (MY the slot, TARGET the job) is true. Its
  default is HTCondor's classic policy: the same group, the running claim an hour old, and a
  priority 20% better.

Among the slots a request may take, the best by the job's Rank come first, then by PREEMPTION_RANK
(default: the worst priority's, then the least run time). A slot whose job has not used up its
MaxJobRetirementTime yet (counted from JobStart) is not a candidate (HTCondor's
NEGOTIATOR_CONSIDER_EARLY_PREEMPTION false): the startd vacates the job it preempts at once.

The candidates go into a matchmaker of their own, built once a cycle, so a request is matched
against kinds of slots, not each claimed slot: the two conditions above are folded into each
candidate's Requirements (per running user, a handful of kinds), PREEMPTION_RANK is its Rank,
and PREEMPTION_REQUIREMENTS, which may read each slot's own timers, is tested last on a slot found,
its answer kept for the cycle per slot and submitter; a request stops after REFUSALS slots it
refused. Only within a submitter's fair share, never in the rounds that hand out what is left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gridbus import classad
from gridbus.adrefs import lowered
from gridbus.agents.negotiator.matchmaker import Matchmaker, Slot, eval_number, get

DEFAULT_PREEMPTION_REQUIREMENTS = (
    "((SubmitterGroup =?= RemoteGroup) && ((time() - EnteredCurrentState) > (1 * 3600))"
    " && (RemoteUserPrio > TARGET.SubmitterUserPrio * 1.2)) || (MY.NiceUser == True)"
)
DEFAULT_PREEMPTION_RANK = "(RemoteUserPrio * 1000000) - ifThenElse(isUndefined(TotalJobRunTime), 0, TotalJobRunTime)"
# Slots a request may find and PREEMPTION_REQUIREMENTS refuse before the request stops looking.
REFUSALS = 32
# What a candidate's Requirements add to the slot's own: preemption by RANK, or by priority.
_MAY_PREEMPT = ("(MY.StartdRank > MY.CurrentRank) || (MY.StartdRank >= MY.CurrentRank"
                " && MY.RemoteUserPrio > TARGET.SubmitterUserPrio)")


@dataclass
class PreemptionPolicy:
    """NEGOTIATOR_CONSIDER_PREEMPTION, PREEMPTION_REQUIREMENTS and PREEMPTION_RANK."""

    enabled: bool = True
    requirements: str = DEFAULT_PREEMPTION_REQUIREMENTS
    rank: str = DEFAULT_PREEMPTION_RANK

    def __post_init__(self) -> None:
        for knob, text in (("PREEMPTION_REQUIREMENTS", self.requirements), ("PREEMPTION_RANK", self.rank)):
            try:
                classad.compile(text)
            except Exception as exc:
                raise ValueError(f"{knob} is not a ClassAd expression: {exc}") from None


class Preemption:
    """One cycle's preemption candidates and the tests made on them."""

    def __init__(self, policy: PreemptionPolicy, matchmaker: Matchmaker):
        self.policy = policy
        self.mm = matchmaker
        self._requirements = classad.compile(policy.requirements)
        self._decided: dict[tuple[int, str], bool] = {}  # (slot index, submitter) -> may preempt

    @classmethod
    def build(
        cls, policy: PreemptionPolicy, machines: list[dict[str, Any]], lows: list[dict[str, Any]], now: float,
        priority: dict[str, float], group_of: dict[str, str], strikes: int, request_seconds: float,
        by_group: bool = False,
    ) -> Preemption:
        """The claimed slots of ``machines`` that may be preempted (``priority``: each running
        user's effective priority; ``group_of``: its group, by accounting name)."""
        ads, ads_low = [], []
        rank = classad.ExprTree(policy.rank)
        for m, low in zip(machines, lows, strict=True):
            if low.get("state") != "Claimed" or low.get("partitionableslot") or low.get("slottype") == "Dynamic":
                continue
            cid, owner = low.get("preemptingclaimid"), low.get("remoteowner")
            if not isinstance(cid, str) or not cid or not isinstance(owner, str) or not owner:
                continue
            started = _num(low.get("jobstart"))
            retirement = _num(low.get("maxjobretirementtime")) or 0.0
            if started is not None and retirement > 0 and started + retirement > now:
                continue  # still retiring: not preempted early
            charged = low.get("accountinggroup") if by_group else None
            name = (charged if isinstance(charged, str) and charged else owner).split("@", 1)[0]
            ad = dict(m)
            ad["ClaimId"] = cid  # what the match hands out: the preempting claim's id
            ad["StartdRank"] = get(m, "Rank", 0)
            ad["Rank"] = rank
            ad["Requirements"] = classad.ExprTree(f"({get(m, 'Requirements', True)}) && ({_MAY_PREEMPT})")
            ad["RemoteUserPrio"] = priority.get(name, 0.5)
            ad["RemoteGroup"] = group_of.get(name, "<none>")
            if started is not None:
                ad["TotalJobRunTime"] = max(0, int(now - started))
            if get(ad, "CurrentRank") is None:
                ad["CurrentRank"] = 0.0
            ads.append(ad)
            ads_low.append(lowered(ad))
        mm = Matchmaker(ads, lows=ads_low, strikes=strikes, request_seconds=request_seconds, claimed=True)
        return cls(policy, mm)

    @staticmethod
    def job(job: dict[str, Any], priority: float, group: str) -> dict[str, Any]:
        """The request's job ad as PREEMPTION_REQUIREMENTS and the candidates read it."""
        return {**job, "SubmitterUserPrio": priority, "SubmitterGroup": group}

    def accept(self, job: dict[str, Any], customer: str) -> Callable[[Slot], bool]:
        """The last test of a candidate found for ``job`` of ``customer``: preemption by RANK, or
        PREEMPTION_REQUIREMENTS (decided once a cycle per slot and submitter)."""
        def test(slot: Slot) -> bool:
            ad = slot.ad
            if eval_number(get(ad, "StartdRank"), ad, job) > eval_number(get(ad, "CurrentRank"), ad, job):
                return True
            key = (slot.index, customer)
            ok = self._decided.get(key)
            if ok is None:
                ok = self._decided[key] = self._requirements.test(ad, job)
            return ok
        return test


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

