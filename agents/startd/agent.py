"""The startd agent: a machine's slots, their claims and their jobs, as composed parts.

| part | module | its job |
|---|---|---|
| `table` | `slots.py` | the slots (static, partitionable, dynamic), their claim ids, the drain in effect |
| `slot_ads` | `ads.py` | the slot ads and private ads, and the match test against them (GetSlots) |
| `claims` | `claims.py` | granting, keeping and ending claims: RequestClaim, Alive, leases, ReleaseClaim, Vacate, Drain |
| `activation` | `activation.py` | the jobs on the claims through the starter: ActivateClaim(s), DeactivateClaim, SuspendClaim, ContinueClaim, exits and usage |
| `reporter` | `reports.py` | execute, activated, usage and exit reports, batched in JobReports calls to each schedd |
| `sandboxes` | `sandbox.py` | file transfer: a job's scratch directory, its input in over the bus before it starts, its output back before its exit is reported |
| `starter` | `starter.py` / `simulated.py` | the job processes (or their simulation) |

The claim protocol is in docs/protocols.md, "Claiming and running". The parts are made here and
passed to one another; the starter's and the reporter's events go to the activation and the
claims, which exist by the time the first event comes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from typing import Any

from gridbus.agent import Agent
from gridbus.agents.startd import cgroups, containers, spawn
from gridbus.agents.startd import slots as sl
from gridbus.agents.startd.accounts import RunAsPolicy, UserMap
from gridbus.agents.startd.activation import Activation
from gridbus.agents.startd.ads import SlotAds
from gridbus.agents.startd.claims import CLAIM_BUSY, CLAIM_REFUSED, Claims
from gridbus.agents.startd.containers import ContainerTool
from gridbus.agents.startd.cron import StartdCron, publishes
from gridbus.agents.startd.detect import detect
from gridbus.agents.startd.reports import Reporter
from gridbus.agents.startd.sandbox import Sandboxes
from gridbus.agents.startd.settings import StartdSettings
from gridbus.agents.startd.simulated import SimulatedStarter
from gridbus.agents.startd.starter import Starter
from gridbus.rpc import MethodResult
from gridbus.status import Status

log = logging.getLogger("gridbus.startd")

# Knob -> the setting it makes, for the knobs a reconfig applies to a running startd.
LIVE_KNOBS = {
    "START": "start", "RANK": "rank", "MAXJOBRETIREMENTTIME": "max_job_retirement_time", "KILLING_TIMEOUT": "killing_timeout",
    "STARTER_UPDATE_INTERVAL": "update_interval", "STARTER_MEMORY_CHECK_INTERVAL": "memory_check_interval",
    "STARTER_ENFORCE_MEMORY_LIMIT": "enforce_memory", "STARTER_ALLOW_RUNAS_OWNER": "allow_runas_owner",
    "STARTER_UNPRIVILEGED_USER": "unprivileged_user", "STARTER_ALLOW_ROOT_JOBS": "allow_root_jobs",
    "USER_MAP": "user_map", "STARTD_REPORT_TIMEOUT": "report_timeout", "STARTD_REPORT_RETRY": "report_retry",
    "CGROUP_MEMORY_LIMIT_POLICY": "memory_policy", "CGROUP_PIDS_LIMIT": "pids_limit",
    "JOB_DEFAULT_REQUESTCPUS": "default_request_cpus", "JOB_DEFAULT_REQUESTMEMORY": "default_request_memory",
    "JOB_DEFAULT_REQUESTDISK": "default_request_disk", "TRANSFER_STALL_TIMEOUT": "transfer_stall",
    "TRANSFER_OPEN_TIMEOUT": "transfer_open_timeout", "KEEP_SANDBOX_ON_HOLD": "keep_sandbox_on_hold",
    "TRANSFER_DIRECT_IO_MIN_MB": "transfer_direct_io_min_mb",
    "STARTD_ATTRS": "startd_attrs", "STARTD_EXPRS": "startd_attrs", "STARTD_CRON_AUTOPUBLISH": "cron_autopublish",
}
# The knobs read only when the startd starts: the machine, its slot layout, where and how jobs run.
RESTART_KNOBS = frozenset({
    "STARTD_NAME", "GRIDBUS_URL", "EXECUTE", "NUM_CPUS", "MEMORY", "DISK", "NUM_GPUS", "GPU_DISCOVERY_EXTRA", "ARCH", "OPSYS",
    "OPSYSANDVER", "UID_DOMAIN", "FILESYSTEM_DOMAIN", "NUM_SLOTS", "NUM_SLOTS_TYPE_1", "SLOT_TYPE_1",
    "SLOT_TYPE_1_PARTITIONABLE", "STARTER_FAST_SPAWN", "STARTD_SIMULATE_JOBS", "SIMULATED_JOB_RUNTIME",
    "BASE_CGROUP", "CGROUP_VERSION", "DOCKER", "DOCKER_EXTRA_ARGUMENTS",
})


class Startd(Agent):
    kind = "startd"
    classes = ("startd",)
    my_type = "Machine"
    part_classes = (SlotAds, Claims, Activation)

    def __init__(self, name: str | None = None, url: str | None = None, *,
                 settings: StartdSettings | None = None, **kw: Any):
        super().__init__(name or socket.getfqdn(), url, **kw)
        self.settings = settings or StartdSettings()
        self.settings.validate()
        self.machine = detect(self.settings.execute, self.settings.overrides, self.settings.gpu_discovery_extra)
        self.table = sl.SlotTable(
            self.name, self.machine.cpus, self.machine.memory, self.machine.disk, self.machine.gpu_ids,
            self.settings.num_slots, self.settings.partitionable, self.settings.slot_share,
        )
        self.cgroups = None if self.settings.simulate_jobs else self._probe_cgroups()
        self.containers = (None if self.settings.simulate_jobs else
                           ContainerTool.find(self.settings.docker, self._own_name(),
                                              self.settings.docker_extra_arguments))
        machine_attrs = {**self.machine.attributes(),
                         **(self.cgroups.attributes() if self.cgroups else {"HasCgroup": False}),
                         **containers.attributes(self.containers),
                         **({"SimulatedJobs": True} if self.settings.simulate_jobs else {})}
        self.slot_ads = SlotAds(self.name, self.address, self.table, machine_attrs, self.machine.gpu_devices,
                                self.settings)
        self.cron = StartdCron(self.settings.cron_jobs, self._cron_reported)
        self.slot_ads.cron_attrs = self.cron.attributes
        self.starter = self._make_starter()
        self.sandboxes = Sandboxes(self.starter if isinstance(self.starter, Starter) else None,
                                   self.machine.filesystem_domain, self.settings, lambda: self._connection,
                                   self._call_daemon)
        self.slot_ads.daemon_stats = lambda: {**self.stats, **self.sandboxes.statistics()}
        self.claims = Claims(self.address, self.table, self.slot_ads, self.starter, self.sandboxes, self.settings,
                             spawn=self.spawn, ads_changed=self.ads_changed)
        self.reporter = Reporter(
            self._call_job_reports,
            timeout=self.settings.report_timeout,
            retry=self.settings.report_retry,
            keep=self.claims.keep_report,
            on_unknown=self.claims.unknown,
            on_answered=self.claims.answered,
            on_activations=lambda schedd, activations, ahead: self.activation.in_answer(schedd, activations, ahead),
            stamp=self._stamp_report,
        )
        self.activation = Activation(self.address, self.claims, self.slot_ads, self.starter, self.reporter,
                                     self.sandboxes, ads_changed=self.ads_changed)
        self.add_parts(self.slot_ads, self.claims, self.activation)

    def _cron_reported(self, changed: bool) -> None:
        # START and the like may read what the job reported: the slot ads are built anew each
        # time; STARTD_CRON_AUTOPUBLISH says whether they go to the collector now.
        if publishes(self.settings.cron_autopublish, changed):
            self.ads_changed()

    def _make_starter(self) -> Starter | SimulatedStarter:
        # The starter's events go to the activation (made after it: it starts jobs through it).
        def exited(job: Any) -> None:
            self.activation.exited(job)

        def usage(jobs: list[Any]) -> None:
            self.activation.usage(jobs)

        if self.settings.simulate_jobs:
            return SimulatedStarter(on_exit=exited, runtime=self.settings.simulated_runtime)
        if self.settings.fast_spawn and not spawn.AVAILABLE:
            log.warning("STARTER_FAST_SPAWN: the fast spawn (agents/startd/_spawn.c) is not built; jobs start by "
                        "subprocess.Popen (a fork of the startd for a job under another account)")
        return Starter(
            self.settings.execute,
            RunAsPolicy(self.settings.allow_runas_owner, self.settings.unprivileged_user, self.settings.allow_root_jobs,
                        user_map=UserMap.parse(self.settings.user_map)),
            killing_timeout=self.settings.killing_timeout,
            enforce_memory=self.settings.enforce_memory,
            on_exit=exited,
            on_usage=usage,
            usage_interval=self.settings.update_interval,
            check_interval=self.settings.memory_check_interval,
            fast_spawn=self.settings.fast_spawn,
            spawn_ahead=self.settings.spawn_ahead,
            cgroup=self.cgroups,
            memory_policy=self.settings.memory_policy.lower(),
            pids_limit=self.settings.pids_limit,
            containers=self.containers,
        )

    def _probe_cgroups(self) -> cgroups.Hierarchy | None:
        """The jobs' cgroups: ``<BASE_CGROUP>/<this startd's name>``, or None (the process scan).

        A pool on a vhost other than "/" puts its vhost between them: pools of several users on one
        machine (personal pools, tests) have startds of the same name, and a starting startd kills
        what it finds in its own groups."""
        base = self.settings.base_cgroup.strip("/")
        own = self._own_name()
        try:
            found = cgroups.probe(f"{base}/{own}" if base else "", self.settings.cgroup_version)
        except cgroups.CgroupError as exc:
            log.warning("jobs run without cgroups (their processes are found by scanning /proc): %s", exc)
            return None
        log.info("jobs run in %s", found.describe())
        return found

    def _own_name(self) -> str:
        """This startd among the others of the machine: its name, after its vhost's if not "/"
        (its cgroups' path below BASE_CGROUP, its containers' label)."""
        own = cgroups.safe_name(self.name)
        if self.url.vhost != "/":
            own = f"{cgroups.safe_name(self.url.vhost)}/{own}"
        return own

    def _stamp_report(self, report: dict[str, Any]) -> None:
        """AheadSeq: how far the schedd's jobs queued ahead on the claim have been taken (it
        sends again the ones past it: an answer that carried them was lost)."""
        claim = self.claims.by_id.get(str(report.get("ClaimId", "")))
        if claim is not None and claim.ahead_seq:
            report["AheadSeq"] = claim.ahead_seq

    async def _call_job_reports(self, schedd: str, batch: list[dict[str, Any]], timeout: float) -> Any:
        return await self.client.call(schedd, "JobReports", {"Reports": batch}, timeout=timeout)

    async def _call_daemon(self, address: str, method_name: str, args: dict[str, Any], timeout: float) -> MethodResult:
        return await self.client.call(address, method_name, args, timeout=timeout)

    # ------------------------------------------------------------------ management object
    def object_properties(self) -> dict[str, Any]:
        drain = self.table.drain
        return {
            **super().object_properties(),
            "Machine": self.machine.machine,
            "Draining": drain is not None,
            "DrainRequestId": drain.request_id if drain else "",
        }

    def object_statistics(self) -> dict[str, Any]:
        return {
            **super().object_statistics(),
            **self.activation.counters,
            "JobsRunning": len(self.starter.running),
            "ClaimsActive": len(self.claims.by_id),
            "ReportsSent": self.reporter.sent,
            "ReportCallsFailed": self.reporter.failures,
        }

    # ------------------------------------------------------------------ ads
    def ads(self) -> list[dict[str, Any]]:
        return self.slot_ads.ads()

    def private_ads(self) -> list[dict[str, Any]]:
        return self.slot_ads.private_ads()

    def ads_named(self, names: set[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return self.slot_ads.ads_named(names)

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        # Before the first ad: a predecessor killed without a stop left its jobs in their groups,
        # and its containers (labelled with this startd's name).
        if self.containers is not None:
            removed = await asyncio.get_running_loop().run_in_executor(None, self.containers.remove_owned)
            if removed:
                log.warning("removed %d container(s) a previous startd %s left", removed, self.name)
        if self.cgroups is not None:
            found = await asyncio.get_running_loop().run_in_executor(None, self.cgroups.clean_leftovers)
            if found:
                log.warning("killed %d process(es) a previous startd %s left running", found, self.name)

    async def on_start(self) -> None:
        self.spawn(self.starter.monitor(), "starter monitor")
        self.spawn(self.claims.lease_loop(), "claim leases")
        self.cron.start()

    async def on_stop(self) -> None:
        await self.cron.stop()
        await self.activation.shut_down()  # no activation starts a job; the launches under way end
        await self.starter.shutdown()
        if self.cgroups is not None:
            self.cgroups.remove_base()
        # The exits of the jobs just killed leave before the connection closes (those whose
        # output goes back once it is back, or the time of a report has passed).
        await self.sandboxes.settle(self.settings.report_timeout)
        self.sandboxes.drop_kept()
        await self.reporter.close(self.settings.report_timeout)

    async def reconfig(self) -> list[str]:
        """Apply what can change without a restart: START, RANK, the default requests, the
        starter's timers and policy, the report timers. Returns (and so the runner logs) only the
        changed knobs now in effect; those read only at the start (the slot layout, the machine,
        EXECUTE, the starter's kind) are logged as waiting for a restart."""
        changed = await super().reconfig()
        if self.config is None or not changed:
            return changed
        fresh = StartdSettings.from_config(self.config)
        self.settings = dataclasses.replace(self.settings, **{k: getattr(fresh, k) for k in LIVE_KNOBS.values()})
        self.slot_ads.reconfigure(self.settings)
        if fresh.cron_jobs != self.cron.jobs:  # STARTD_CRON_JOBLIST and its jobs are read at reconfig too
            await self.cron.replace(fresh.cron_jobs)
        self.claims.settings = self.settings
        self.sandboxes.settings = self.settings
        st = self.starter
        st.killing_timeout, st.enforce_memory = self.settings.killing_timeout, self.settings.enforce_memory
        st.usage_interval, st.check_interval = self.settings.update_interval, self.settings.memory_check_interval
        st.memory_policy, st.pids_limit = self.settings.memory_policy.lower(), self.settings.pids_limit
        st.policy = RunAsPolicy(self.settings.allow_runas_owner, self.settings.unprivileged_user, self.settings.allow_root_jobs,
                                user_map=UserMap.parse(self.settings.user_map))
        self.reporter.timeout, self.reporter.retry = self.settings.report_timeout, self.settings.report_retry
        self.ads_changed()
        later = [name for name in changed if name in RESTART_KNOBS]
        if later:
            log.warning("reconfig: %s changed, applied only when the startd restarts", ", ".join(later))
        return [name for name in changed if name in LIVE_KNOBS or name in self.RUNTIME_KNOBS]


__all__ = ["CLAIM_BUSY", "CLAIM_REFUSED", "Startd", "Status"]
