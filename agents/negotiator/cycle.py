"""One negotiation cycle over the ads the collector gave (docs/protocols.md, "Negotiation").

Charge usage to the accountant; order the submitters by effective user priority; give each its
fair share of the pool in the first round and what is left in later rounds; ask each submitter's
schedd for resource requests; match them; send each batch's matches in one Match call.

Matchmaking runs on a thread of its own (``off_loop``), not on the event loop: how long it takes
is decided by the expressions users send (each evaluation is bounded, but a cycle evaluates many),
and the negotiator must keep answering its calls meanwhile. A request the matchmaker finds hostile
(``REJECT_HOSTILE``) is rejected for the cycle with a sentence in the log; a submitter with
HOSTILE_REQUESTS such requests in one cycle is skipped for the rest of it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gridbus.accounting import accounting_name
from gridbus.adrefs import SlotRefs, lowered, slot_job_refs
from gridbus.agents.negotiator.accountant import Accountant, parse_limits
from gridbus.agents.negotiator.cycle_stats import CycleStats
from gridbus.agents.negotiator.groups import GroupConfig
from gridbus.agents.negotiator.matchmaker import (
    HOSTILE_STRIKES,
    REJECT_HOSTILE,
    REJECT_LIMIT,
    REJECT_NO_MATCH,
    REJECT_PRIORITY,
    REQUEST_SECONDS,
    Matchmaker,
    fair_shares,
    get,
)
from gridbus.agents.negotiator.pending import PendingMatches
from gridbus.agents.negotiator.preemption import REFUSALS, Preemption, PreemptionPolicy
from gridbus.agents.negotiator.submitters import (
    MATCHES_PER_CALL,
    SETTLED,
    ScheddCalls,
    Submitter,
    submitters_of,
)
from gridbus.classad.values import is_number

MAX_ROUNDS = 6  # HTCondor gives up after a few pie spins too
HOSTILE_REQUESTS = 2  # hostile requests of one submitter after which it is skipped for the cycle
GROUP_JOB_ATTRS = frozenset({"acctgroup", "acctgroupuser"})
# A request short of slots after the free ones looks for slots to preempt.
_PREEMPT_AFTER = (REJECT_PRIORITY, REJECT_NO_MATCH)


class Cycle:
    """The negotiation cycles of one negotiator: what one cycle does, and what cycles share (the
    slots still pending, the match thread, the last cycle's figures)."""

    def __init__(
        self, accountant: Accountant, schedds: ScheddCalls, pending: PendingMatches, save: Callable[[], None],
        log: logging.Logger, *, prefetch: bool = True, match_strikes: int = HOSTILE_STRIKES,
        match_request_seconds: float = REQUEST_SECONDS, name: str = "", groups: GroupConfig | None = None,
        preemption: PreemptionPolicy | None = None,
    ):
        if match_strikes < 1 or match_request_seconds <= 0:
            raise ValueError("a request's evaluation allowance must be at least 1 strike and a positive time")
        self.accountant = accountant
        self.schedds = schedds
        self.pending = pending
        self._save = save
        self.log = log
        self.prefetch = bool(prefetch)
        # A request's evaluation allowance per cycle (see matchmaker.py, "Hostile requests").
        self.match_strikes = int(match_strikes)
        self.match_request_seconds = float(match_request_seconds)
        self.name = name
        self.groups = groups if groups is not None else GroupConfig.none()
        self.preemption = preemption if preemption is not None else PreemptionPolicy()
        # This cycle's preemption candidates, built on first need (a cycle in which every request
        # finds a free slot never copies the claimed slots' ads), and whether there are any.
        self._preempt: Preemption | None = None
        self._build_preempt: Callable[[], Preemption] | None = None
        self._may_preempt = False
        self._preempting = False  # whether the round being matched may preempt (within shares)
        self.last = CycleStats()
        self.cycles = 0
        self.total_matches = 0
        self._job_attrs: frozenset[str] | None = frozenset()  # this cycle's AutoClusterAttrs
        self._matcher: ThreadPoolExecutor | None = None  # the thread matchmaking runs on
        self._sends: list[asyncio.Future] = []  # this cycle's Match calls, answered meanwhile

    def close(self) -> None:
        if self._matcher is not None:
            self._matcher.shutdown(wait=False, cancel_futures=True)
            self._matcher = None

    def _room(self, mm: Matchmaker) -> bool:
        """Whether a slot is left to match: a free one, or one to preempt in this round."""
        if mm.has_free():
            return True
        if not self._preempting:
            return False
        return self._preempt.mm.has_free() if self._preempt is not None else self._build_preempt is not None

    def _candidates(self) -> Preemption | None:
        """This cycle's preemption candidates (on the match thread: built there the first time)."""
        if self._preempt is None and self._build_preempt is not None:
            self._preempt, self._build_preempt = self._build_preempt(), None
        return self._preempt

    async def off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the match thread. One thread: the cycle's steps stay in order, and the
        matchmaker's state is only ever touched by one of them at a time."""
        if self._matcher is None:
            self._matcher = ThreadPoolExecutor(1, thread_name_prefix=f"negotiator-{self.name}-match")
        return await asyncio.get_running_loop().run_in_executor(self._matcher, functools.partial(fn, *args))

    async def run(
        self, machines: list[dict[str, Any]], submitter_ads: list[dict[str, Any]], started: float | None = None,
        fetch: float = 0.0,
    ) -> CycleStats:
        """One cycle over ads already fetched (the benchmark's simulator calls this directly);
        ``started``: when the cycle began fetching them (its duration counts the fetch, ``fetch`` s)."""
        started = time.monotonic() if started is None else started
        stats = CycleStats(start=time.time(), fetch=fetch)
        now = time.time()
        mark = time.monotonic()
        in_use, limits_used, mm, pie = await self.off_loop(self._prepare, machines, now)
        self.accountant.update_usage(in_use, now)
        stats.slots = len(mm.slots)
        subs = submitters_of(submitter_ads)
        stats.submitters = len(subs)
        stats.idle_jobs = sum(s.idle for s in subs)
        owners = sorted({s.owner for s in subs}, key=lambda o: (self.accountant.effective_priority(o), o))
        mark = stats.lap("accounting", mark)
        self._preempting = self._may_preempt
        if self.prefetch and self._room(mm):
            # NEGOTIATOR_PREFETCH_REQUESTS: every submitter's first page at once, so a cycle
            # waits for the slowest schedd once instead of for each in turn. Not when no slot is
            # free (a pool filling up, its slots matched and not yet re-advertised): the rounds
            # would ask nothing of the schedds, busy with their claims.
            await asyncio.gather(*(self.schedds.fetch(s, self._job_attrs, stats) for s in subs))
        mark = stats.lap("first_requests", mark)
        self._sends = []
        if self.groups.enabled:
            await self._negotiate_groups(subs, mm, pie, in_use, limits_used, stats)
        else:
            await self._negotiate_owners(subs, owners, mm, pie, in_use, limits_used, stats)
        mark = stats.lap("matching", mark)
        stats.matches = sum(await asyncio.gather(*self._sends))
        stats.lap("answers", mark)
        self._sends = []
        for sub in subs:
            for req in sub.requests:
                if req["Left"] > 0:
                    reason = req.get("Reason") or REJECT_PRIORITY
                    stats.rejections[reason] = stats.rejections.get(reason, 0) + req["Left"]
        stats.evaluations = mm.evaluations
        stats.duration = time.monotonic() - started
        self.last = stats
        self.cycles += 1
        self.total_matches += stats.matches
        try:
            self._save()
        except OSError:
            self.log.exception("could not save the accountant")
        self.log.info(
            "cycle %d: %d matches, %d slots, %d submitters, %d requests, %.3f s (%.3f s reading the ads, "
            "%.3f s accounting, %.3f s first requests, %.3f s matching, %.3f s waiting for Match answers)",
            self.cycles, stats.matches, stats.slots, stats.submitters, stats.requests, stats.duration, stats.fetch,
            stats.accounting, stats.first_requests, stats.matching, stats.answers,
        )
        return stats

    async def _negotiate_owners(
        self, subs: list[Submitter], owners: list[str], mm: Matchmaker, pie: float, in_use: dict[str, float],
        limits_used: dict[str, float], stats: CycleStats,
    ) -> None:
        """Without groups: the submitters by owner, each owner's fair share of the pool in the
        first round and of what is left in later ones."""
        async def serve(owner: str, budget: float) -> tuple[int, float]:
            got = spent = 0.0
            for sub in (s for s in subs if s.owner == owner):
                if budget - spent <= 1e-9 or not self._room(mm):
                    break
                matched, weight = await self._negotiate_submitter(sub, mm, budget - spent, limits_used, stats)
                got += matched
                spent += weight
            return int(got), spent

        await self._rounds(mm, pie, in_use, stats,
                           lambda: [o for o in owners if any(s.wants() for s in subs if s.owner == o)], serve)

    async def _rounds(self, mm: Matchmaker, pie: float, in_use: dict[str, float], stats: CycleStats,
                      active_now: Callable[[], list[str]],
                      serve: Callable[[str, float], Awaitable[tuple[int, float]]], budget: float = math.inf) -> None:
        """HTCondor's negotiation rounds over ``active_now()`` (the owners, or one group's customers):
        each one's fair share of ``pie`` in the first round and of what is left (at most ``budget``)
        in later ones; when a round matches nothing, its shares too small for a whole slot, the
        rest in priority order. ``serve(name, share)`` answers (jobs matched, weight used)."""
        unlimited = False
        for round_no in range(MAX_ROUNDS):
            self._preempting = not unlimited and self._may_preempt
            active = active_now()
            if not active or not self._room(mm) or budget <= 1e-9:
                break
            stats.rounds = max(stats.rounds, round_no + 1)
            eup = {n: self.accountant.effective_priority(n) for n in active}
            if unlimited:
                shares = {n: budget for n in active}
            elif round_no == 0:
                shares = fair_shares(pie, eup, in_use)
            else:
                shares = fair_shares(min(budget, await self.off_loop(lambda: mm.free_weight)), eup, {})
            matched_this_round = 0
            for name in active:
                share = min(shares[name], budget)
                if share <= 1e-9 or not self._room(mm):
                    continue
                got, weight = await serve(name, share)
                budget -= weight
                matched_this_round += got
            if matched_this_round == 0:
                if unlimited:
                    break
                unlimited = True  # shares too small for a whole slot: the rest in priority order

    # ------------------------------------------------------------------ with accounting groups
    async def _negotiate_groups(
        self, subs: list[Submitter], mm: Matchmaker, pie: float, in_use: dict[str, float],
        limits_used: dict[str, float], stats: CycleStats,
    ) -> None:
        """With GROUP_NAMES: every request fetched first (its AcctGroup says which group it is
        negotiated in), the groups' quotas and allocations assigned, then each group in turn,
        the most starving first, its customers by user priority within its allocation; last, the
        customers of groups that autoregroup with the <none> group's, in what is left."""
        usage: dict[str, float] = {}
        for name, held in in_use.items():
            key = self.groups.group_of(name).name.lower()
            usage[key] = usage.get(key, 0.0) + held
        if not self._room(mm):  # nothing to hand out: the schedds, busy claiming, are not asked
            for g in self.groups.groups():
                g.usage = usage.get(g.name.lower(), 0.0)
            return
        for sub in subs:  # every page: a group's turn needs its requests, wherever they are paged
            while not sub.exhausted and not sub.failed:
                if not await self.schedds.fetch(sub, self._job_attrs, stats):
                    break
        customers: dict[str, list[tuple[Submitter, dict[str, Any]]]] = {}
        group_of: dict[str, str] = {}  # customer -> lower-cased group name
        demand: dict[str, float] = {}
        for sub in subs:
            for req in sub.open_requests():
                job = req["Ad"]
                name = accounting_name(job, sub.owner, get)
                group = self.groups.group_of(get(job, "AcctGroup")).name.lower()
                customers.setdefault(name, []).append((sub, req))
                group_of[name] = group
                cpus = get(job, "RequestCpus", 1)
                demand[group] = demand.get(group, 0.0) + req["Left"] * (float(cpus) if is_number(cpus) and cpus > 0 else 1.0)
        for key, held in usage.items():
            demand[key] = demand.get(key, 0.0) + held
        self.groups.assign(pie, usage, demand)
        regroup: list[str] = []
        for grp in self.groups.order():
            members = [c for c, g in group_of.items() if g == grp.name.lower()]
            if grp.autoregroup and grp.parent is not None:
                regroup += members
            if grp.parent is None:  # <none>: last, with the autoregrouped customers
                break
            budget = grp.allocated - grp.usage
            if members and budget > 1e-9:
                await self._negotiate_customers(members, customers, mm, grp.allocated, budget, in_use, limits_used, stats)
        none_members = [c for c, g in group_of.items() if g == self.groups.root.name.lower()]
        root = self.groups.root
        budget = root.allocated - root.usage
        if regroup:  # HTCondor's autoregroup: the rest of the pool, shared with the <none> group
            budget = math.inf
        if none_members or regroup:
            await self._negotiate_customers(none_members + regroup, customers, mm, root.allocated, budget, in_use,
                                            limits_used, stats)

    async def _negotiate_customers(
        self, names: list[str], customers: dict[str, list[tuple[Submitter, dict[str, Any]]]], mm: Matchmaker,
        pie: float, budget: float, in_use: dict[str, float], limits_used: dict[str, float], stats: CycleStats,
    ) -> None:
        """One group's turn: its customers' fair shares of the group's ``pie`` in the first round,
        of what is left of its ``budget`` in later ones, then the rest in priority order."""
        names = sorted(set(names), key=lambda n: (self.accountant.effective_priority(n), n))

        def active_now() -> list[str]:
            return [n for n in names if any(r["Left"] > 0 and r.get("Reason") not in SETTLED and not s.failed
                                            for s, r in customers[n])]

        async def serve(name: str, share: float) -> tuple[int, float]:
            return await self._negotiate_customer(customers[name], mm, share, limits_used, stats)

        await self._rounds(mm, pie, in_use, stats, active_now, serve, budget)

    async def _negotiate_customer(
        self, entries: list[tuple[Submitter, dict[str, Any]]], mm: Matchmaker, budget: float,
        limits_used: dict[str, float], stats: CycleStats,
    ) -> tuple[int, float]:
        """Match one customer's requests (from any of its schedds) within ``budget``."""
        by_sub: dict[int, tuple[Submitter, list[dict[str, Any]]]] = {}
        for sub, req in entries:
            if req["Left"] > 0 and req.get("Reason") not in SETTLED and not sub.failed:
                by_sub.setdefault(id(sub), (sub, []))[1].append(req)
        spent = 0.0
        made = 0
        for sub, batch in by_sub.values():
            matches, spent, out_of_budget = await self.off_loop(
                self._match_batch, sub, batch, mm, budget, spent, limits_used
            )
            self._send(sub, matches, stats)
            made += len(matches)
            if out_of_budget or not self._room(mm) or spent >= budget - 1e-9:
                break
        return made, spent

    def _send(self, sub: Submitter, matches: list[dict[str, Any]], stats: CycleStats) -> None:
        """Send ``matches`` to the submitter's schedd, not awaited here: the schedd takes its
        matches while the cycle goes on with the next submitter (the slots are taken either way);
        the cycle gathers the answers."""
        for i in range(0, len(matches), MATCHES_PER_CALL):
            chunk = matches[i : i + MATCHES_PER_CALL]
            self._sends.append(asyncio.ensure_future(self.schedds.send_matches(sub, chunk, stats)))

    def _prepare(
        self, machines: list[dict[str, Any]], now: float
    ) -> tuple[dict[str, float], dict[str, float], Matchmaker, float]:
        """The cycle's work over every Machine ad (on the match thread): usage, the job attributes
        slots read, the matchmaker, and the pie."""
        lows = [lowered(m) for m in machines]  # once for the cycle: the usage, the refs, the matchmaker
        in_use, limits_used = usage(lows, self.groups.enabled)
        # What the schedds' requests must carry besides the significant attributes: every job
        # attribute a slot may read (all Machine ads, claimed ones too, so the list, and with it
        # the schedds' autoclusters, does not change with what is busy). The matchmaker groups
        # its slots by the same names (a superset of what its unclaimed slots read).
        refs = SlotRefs(lows)
        self._job_attrs = slot_job_refs(refs)
        if self.groups.enabled and self._job_attrs is not None:
            # A request says which group it is negotiated in and who is charged for it.
            self._job_attrs = self._job_attrs | GROUP_JOB_ATTRS
        pie = sum(float(m.get("cpus", 1) or 0) for m in lows if m.get("state") in ("Unclaimed", "Claimed", None))
        ads, ads_low = self.pending.hide(machines, lows, now)
        if self.groups.enabled:  # a group's quota counts what it was matched and not shown yet
            for name, weight in self.pending.usage().items():
                in_use[name] = in_use.get(name, 0.0) + weight
        mm = Matchmaker(ads, lows=ads_low, refs=refs, strikes=self.match_strikes,
                        request_seconds=self.match_request_seconds)
        self._preempt, self._build_preempt = None, None
        self._may_preempt = self.preemption.enabled and any(low.get("state") == "Claimed" for low in ads_low)
        if self._may_preempt:  # NEGOTIATOR_CONSIDER_PREEMPTION, and claimed slots to consider
            names = set(in_use)
            self._build_preempt = functools.partial(
                Preemption.build, self.preemption, ads, ads_low, now,
                {n: self.accountant.effective_priority(n) for n in names},
                {n: self.groups.group_of(n).name for n in names} if self.groups.enabled else {},
                self.match_strikes, self.match_request_seconds, by_group=self.groups.enabled)
        return in_use, limits_used, mm, pie

    async def _negotiate_submitter(
        self, sub: Submitter, mm: Matchmaker, budget: float, limits_used: dict[str, float], stats: CycleStats
    ) -> tuple[int, float]:
        """Match this submitter's requests within ``budget`` slot weight; returns (matches sent,
        weight)."""
        spent = 0.0
        made = 0
        batch = sub.open_requests()
        while True:
            if not batch and not sub.exhausted and not sub.failed:
                batch = await self.schedds.fetch(sub, self._job_attrs, stats)
                if not batch:
                    break
            if not batch:
                break
            matches, spent, out_of_budget = await self.off_loop(
                self._match_batch, sub, batch, mm, budget, spent, limits_used
            )
            self._send(sub, matches, stats)
            made += len(matches)
            if out_of_budget or sub.failed or not self._room(mm) or spent >= budget - 1e-9:
                break
            batch = []
        return made, spent

    def _match_batch(
        self, sub: Submitter, batch: list[dict[str, Any]], mm: Matchmaker, budget: float, spent: float,
        limits_used: dict[str, float],
    ) -> tuple[list[dict[str, Any]], float, bool]:
        """Match one batch of a submitter's requests (on the match thread); returns the matches,
        the slot weight spent so far, and whether the submitter's budget ran out."""
        matches: list[dict[str, Any]] = []
        out_of_budget = False
        now = time.time()
        for req in batch:
            job = req["Ad"]
            charged = accounting_name(job, sub.owner, get) if self.groups.enabled else ""
            wanted = parse_limits(get(job, "ConcurrencyLimits"))
            # How many more jobs of this request the concurrency limits let run.
            cap = req["Left"]
            for n, a in wanted.items():
                if a > 0:
                    room = self.accountant.limit_max(n) - limits_used.get(n, 0.0)
                    cap = min(cap, max(0, math.floor(room / a + 1e-9)))
            found, reason = mm.match(job, cap, budget - spent) if cap > 0 else ([], None)
            pm = self._candidates() if self._preempting and len(found) < cap and reason in _PREEMPT_AFTER else None
            if pm is not None:
                # The free slots ran out or do not suit: slots to preempt, within the share.
                customer = charged or accounting_name(job, sub.owner, get)
                group = self.groups.group_of(get(job, "AcctGroup")).name
                pjob = Preemption.job(job, self.accountant.effective_priority(customer), group)
                room = budget - spent - sum(m.weight for m in found)
                more, why = pm.mm.match(pjob, cap - len(found), room, pm.accept(pjob, customer), REFUSALS)
                if more:
                    found, reason = found + more, why
            if reason is None and cap < req["Left"]:
                reason = REJECT_LIMIT
            for m in found:
                for n, a in wanted.items():
                    limits_used[n] = limits_used.get(n, 0.0) + a
                spent += m.weight
                # No SlotAd: the startd's RequestClaim answer brings the slot's ad, fresh, so the
                # match does not carry one (1 KB each, 200 MB in a cycle of 200,000 matches: a
                # second's copying and encoding here, three of decoding in the schedds).
                matches.append(
                    {
                        "AutoClusterId": req["AutoClusterId"],
                        "ClaimId": m.slot.claim_id,
                        "Slot": m.slot.name,
                        "Startd": m.slot.startd,
                    }
                )
                self.pending.remember(m.slot, m.slot_ad, job, now, charged, m.weight)
            req["Left"] -= len(found)
            req["Reason"] = reason
            if reason == REJECT_HOSTILE:
                sub.hostile += 1
                self.log.warning(
                    "request %s of %s rejected for this cycle as a hostile expression: %s",
                    req["AutoClusterId"], sub.name, mm.hostile,
                )
                if sub.hostile >= HOSTILE_REQUESTS:
                    self.log.warning("%s skipped for the rest of this cycle: %d hostile requests", sub.name, sub.hostile)
                    sub.failed = True
                    break
            if reason == REJECT_PRIORITY:
                out_of_budget = True
                break
            if not self._room(mm):
                break
        return matches, spent, out_of_budget


def usage(lows: list[dict[str, Any]], by_group: bool = False) -> tuple[dict[str, float], dict[str, float]]:
    """Slot weight held per owner (``by_group``: per accounting name, the running job's
    AccountingGroup where it has one), and concurrency-limit use, from the claimed slots (the
    Machine ads keyed by lower-case names)."""
    in_use: dict[str, float] = {}
    limits: dict[str, float] = {}
    for m in lows:
        if m.get("state") != "Claimed" or m.get("partitionableslot", False):
            continue
        owner = m.get("remoteowner")
        charged = m.get("accountinggroup") if by_group else None
        if isinstance(charged, str) and charged:
            owner = charged
        if isinstance(owner, str) and owner:
            owner = owner.split("@", 1)[0]
            cpus = m.get("cpus", 1)
            in_use[owner] = in_use.get(owner, 0.0) + (float(cpus) if is_number(cpus) else 1.0)
        for name, amount in parse_limits(m.get("concurrencylimits")).items():
            limits[name] = limits.get(name, 0.0) + amount
    return in_use, limits
