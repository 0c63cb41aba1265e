"""JobReports: the startds' reports on the jobs they run for this schedd (usage, exits, and the
outcomes of activations sent in earlier answers), batched. Each report is applied by the shadows
(shadows.py) and fails alone; the answer carries the next activations of the calling startd's
claims, and goes only once the batch's changes are on disk: the startd forgets a report it has
an answer to, so a schedd that dies before its commit leaves the startd the report to send again."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gridbus.agent import Call, method
from gridbus.agents.schedd.claims import ACTIVATING, Claim, Claims
from gridbus.agents.schedd.commits import Commits
from gridbus.agents.schedd.inline_sandboxes import InlineSandboxes
from gridbus.agents.schedd.shadows import JobStateCalls, Shadows, job_of
from gridbus.status import Status, invalid

log = logging.getLogger("gridbus.schedd.reports")


class Reports:
    def __init__(self, claims: Claims, shadows: Shadows, state: JobStateCalls, commits: Commits,
                 inline: InlineSandboxes | None = None):
        self.claims = claims
        self.shadows = shadows
        self.state = state
        self.commits = commits
        self.inline = inline  # small sandboxes: outputs written from the reports, inputs put in the answer

    @method("scheduler")
    async def JobReports(self, call: Call, Reports: list) -> dict[str, Any]:
        unknown: list[str] = []
        for i, report in enumerate(Reports):
            if not isinstance(report, dict) or not isinstance(report.get("ClaimId"), str):
                raise invalid(f"JobReports: Reports[{i}] must be a map with a ClaimId")
        now = time.monotonic()
        callers: set[str] = set()  # startds that take activations in this answer
        resend: list[Claim] = []
        failed: list[dict[str, Any]] = []
        reporting: dict[str, tuple[Claim, int]] = {}  # claim id -> (claim, AheadSeq its reports carry)
        if self.inline is not None:  # the outputs that came inside exit reports, in place before any is applied
            await self.inline.take_outputs(Reports)
        for report in Reports:
            claim = self.claims.by_id.get(report["ClaimId"])
            if claim is None:
                unknown.append(report["ClaimId"])
                continue
            claim.last_alive = now
            self.shadows.heard(claim)  # (a claim read back at a restart, settled by this call)
            if claim.in_reports:
                callers.add(claim.startd)
                seq = report.get("AheadSeq")
                seen = reporting.get(claim.claim_id, (claim, 0))[1]
                reporting[claim.claim_id] = (claim, max(seen, seq if isinstance(seq, int) else 0))
            try:
                await self._take_report(claim, report, resend)
            except Exception as exc:
                # One report that cannot be applied fails alone: the batch's others are, and
                # the answer is still OK, so the startd does not send this one again for ever.
                log.exception("report %s of job %s on %s could not be applied",
                                   report.get("Event"), job_of(report), claim.slot)
                failed.append({"ClaimId": claim.claim_id, "ClusterId": report.get("ClusterId"),
                               "ProcId": report.get("ProcId"), "Status": int(Status.EXCEPTION),
                               "Text": f"{type(exc).__name__}: {exc}"})
                await self._report_failed(claim, report, exc)
        out: dict[str, Any] = {"Unknown": unknown}
        if failed:
            out["Failed"] = failed
        # An exit with no start of a job queued ahead behind it: the claim is reused as before.
        self.shadows.settle_awaiting()
        activations = self.shadows.activations_for_answer(callers, resend)
        if activations:
            out["Activations"] = activations
        ahead = self.shadows.ahead_for_answer(reporting, {a["ClaimId"] for a in activations})
        if ahead:
            out["Ahead"] = ahead
        # The rest of the next jobs chosen for this batch go out in one ActivateClaims per startd.
        self.shadows.flush_activations_now()
        # Answered only once the exits are on disk: the startd forgets a report it has an answer
        # to, so a crash before this commit must leave it the report to send again. The owners'
        # shadows read the small inputs of the answer's activations meanwhile.
        if self.inline is not None and (activations or ahead):
            await asyncio.gather(self.inline.attach([*activations, *ahead]), self.commits.now())
        else:
            await self.commits.now()
        return out

    async def _take_report(self, claim: Claim, report: dict[str, Any], resend: list[Claim]) -> None:
        job = job_of(report)
        waiting = claim.state == ACTIVATING  # for the outcome of the activation of claim.job
        if report.get("Event") == "activated" and (job == claim.job or not (waiting and claim.buffered)):
            await self.shadows.activation_reported(claim, report)
            return
        if waiting and (job == claim.job or claim.buffered):
            # The activation's outcome is still on its way (an ActivateClaims answer comes by
            # another queue than this call; an activation that rode in an answer is reported
            # once its job runs): its job's reports wait for it, and so does every report behind
            # them. A short job's exit can come before the outcome, with the start of the job
            # queued ahead behind that exit, which must not be applied before the exit is.
            claim.buffered.append(report)
            self.claims.changed(claim)  # on disk with the claim before this call is answered
            return
        if claim.state == ACTIVATING and claim.reply_sent and report.get("Event") == "exit" and job != claim.job:
            # A repeated exit report of the claim's previous job: the startd never got the
            # answer that carried the next activation, so it goes again in this one.
            resend.append(claim)
        await self.shadows.handle_report(claim, report)

    async def _report_failed(self, claim: Claim, report: dict[str, Any], exc: Exception) -> None:
        """An exit report that could not be applied must not leave its job Running on a claim
        that has ended: the job is held with the reason (its owner sees it, and may release it),
        and the claim, whose state is unknown now, goes back to its startd."""
        job = job_of(report)
        if report.get("Event") != "exit" or job is None or claim.job != job:
            return
        try:
            self.claims.job_ended(claim)
            self.claims.release(claim)
            await self.state.job_report_failed(job[0], job[1], f"the schedd could not apply the job's exit report: "
                                                         f"{type(exc).__name__}: {exc}")
        except Exception:
            log.exception("putting job %d.%d on hold after its failed report failed too", *job)

