"""DAGMan's engine: walks a parsed DAG, submitting node jobs to a schedd and following them in the
nodes log, as HTCondor's condor_dagman does.

(One module over 500 lines: the loop and every transition of a node's state read together.)

One loop, one thread: read the new events of ``<dag>.nodes.log``, reap finished PRE/POST scripts,
start what is ready within the throttles (-maxidle, -maxjobs, -maxpre, -maxpost, MAXJOBS per
category), write the node status file when something changed, sleep a scan interval. A node goes
NOT_READY -> READY -> PRERUN -> SUBMITTED -> POSTRUN -> DONE or ERROR (FUTILE when an ancestor
failed), with RETRY from the start on failure.

Node jobs carry ``DAGManJobId`` (the DAGMan job's cluster), ``DAGNodeName``, ``DAGManNodesLog`` (the
schedd writes their events there as well as to their own log) and ``LogNotes = "DAG Node: <name>"``
(in the submit event), so recovery after DAGMan was killed reads which cluster is which node back
from the nodes log and submits nothing that is already in the queue or done.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gridbus.console.dagman.jobstate import JobstateLog
from gridbus.console.dagman.noderun import (
    DAG_STATUS_ABORT,
    DAG_STATUS_NODE_FAILED,
    DAG_STATUS_OK,
    DAG_STATUS_RM,
    DONE,
    ERROR,
    EXIT_ABORT,
    EXIT_ERROR,
    EXIT_OKAY,
    FUTILE,
    NOT_READY,
    POSTRUN,
    PRERUN,
    READY,
    SUBMITTED,
    NodeRun,
    idle_procs,
)
from gridbus.console.dagman.outputs import DagmanOut, write_dot, write_node_status
from gridbus.console.dagman.scripts import ScriptOutput, inherited_streams
from gridbus.dag.model import FINAL, SUBDAG, Dag, Node, Script
from gridbus.eventlog import JobEventLog, JobEventType, writer

# HTCondor's defaults for the throttles and the knobs DAGMan reads.
DEFAULTS: dict[str, Any] = {
    "DAGMAN_MAX_JOBS_IDLE": 1000,
    "DAGMAN_MAX_JOBS_SUBMITTED": 0,
    "DAGMAN_MAX_PRE_SCRIPTS": 20,
    "DAGMAN_MAX_POST_SCRIPTS": 20,
    "DAGMAN_MAX_SUBMITS_PER_INTERVAL": 100,
    "DAGMAN_USER_LOG_SCAN_INTERVAL": 5,
    "DAGMAN_MAX_RESCUE_NUM": 100,
    "DAGMAN_ALWAYS_RUN_POST": False,
}


class Submitter:
    """How the engine reaches the schedd (a protocol the tests may replace)."""

    def submit(self, run: NodeRun, engine: Engine) -> tuple[int, int]:  # (cluster, procs)
        raise NotImplementedError

    def remove(self, clusters: list[int], reason: str) -> None:
        raise NotImplementedError


class Engine:
    def __init__(self, dag: Dag, dag_file: Path, submitter: Submitter, *, dagman_id: int = 0,
                 options: dict[str, Any] | None = None, recovery: bool = False,
                 clock: Callable[[], float] = time.time):
        self.dag = dag
        self.dag_file = Path(dag_file).absolute()
        self.workdir = self.dag_file.parent
        self.submitter = submitter
        self.dagman_id = dagman_id
        self.options = {**DEFAULTS, **(options or {})}
        self.recovery = recovery
        self.clock = clock
        self.out = DagmanOut(Path(f"{self.dag_file}.dagman.out"))
        self.nodes_log = Path(f"{self.dag_file}.nodes.log")
        self.runs: dict[str, NodeRun] = {}
        for order, node in enumerate(dag.all_nodes()):
            self.runs[node.name] = NodeRun(node, waiting=len(node.parents), order=order)
        self.final = self.runs[dag.final.name] if dag.final else None
        self.by_cluster: dict[int, NodeRun] = {}
        self.pre_running = 0
        self.post_running = 0
        self.status = DAG_STATUS_OK
        self.abort_code: int | None = None
        self.changed = True
        self.last_status_write = 0.0
        self.premarked = 0
        self.submits = 0
        self._log: JobEventLog | None = None
        self._recovering = False  # reading the nodes log of a DAGMan before this one
        self.jobstate = JobstateLog(self.workdir / dag.jobstate_log, clock) if dag.jobstate_log else None

    # ------------------------------------------------------------------ throttles
    @property
    def max_idle(self) -> int:
        return int(self.options["DAGMAN_MAX_JOBS_IDLE"])

    def idle_procs(self) -> int:
        return idle_procs(self.runs.values())

    def submitted_clusters(self) -> int:
        return sum(1 for r in self.runs.values() if r.state == SUBMITTED)

    def category_running(self, category: str) -> int:
        return sum(1 for r in self.runs.values()
                   if r.node.category == category and r.state in (PRERUN, SUBMITTED, POSTRUN))

    # ------------------------------------------------------------------ the run
    def run(self, interval: float | None = None) -> int:
        """Run the DAG to its end; returns condor_dagman's exit code."""
        interval = float(self.options["DAGMAN_USER_LOG_SCAN_INTERVAL"] if interval is None else interval)
        self.start()
        while not self.finished():
            progressed = self.step()
            if not progressed:
                time.sleep(interval)
        return self.finish()

    def start(self) -> None:
        self.out.banner(self.dag_file, self.dagman_id, self.options, len(self.runs))
        self.nodes_log.touch()
        self._log = JobEventLog(self.nodes_log)
        if self.jobstate is not None:
            self.jobstate.dagman_started(self.dagman_id)
        for run in self.runs.values():
            if run.node.done:
                self.premarked += 1
        if self.recovery:
            self.out.write("Running in RECOVERY mode... >>>>>>>>>>")
            if self.jobstate is not None:
                self.jobstate.recovery_started()
            self._recovering = True
            self._recover()
            self._recovering = False
            if self.jobstate is not None:
                self.jobstate.recovery_finished()
            self.out.write("...done with RECOVERY mode <<<<<<<<")
        for run in list(self.runs.values()):
            if run.node.done and run.state not in (DONE,):
                self._set_done(run, "premarked DONE")
        for run in self.runs.values():
            if run.state == NOT_READY and run.waiting == 0 and run is not self.final:
                run.state = READY
        if self.dag.dot:
            write_dot(self.workdir / self.dag.dot[0], self.dag)
        self.out.status_table(self.status, self.runs)

    def step(self) -> bool:
        """One pass: events, scripts, submissions. True when something happened."""
        progressed = self._read_events()
        progressed |= self._reap_scripts()
        if self.abort_code is None:
            progressed |= self._start_ready()
        if self.final is not None and self.final.state == NOT_READY and self._others_finished():
            self.final.state = READY
            progressed = True
            progressed |= self._start_ready(only_final=True)
        if progressed:
            self.changed = True
        self._maybe_write_status()
        return progressed

    def finished(self) -> bool:
        if any(r.state in (PRERUN, SUBMITTED, POSTRUN) for r in self.runs.values()):
            return False
        if self.final is not None and self.final.state in (NOT_READY, READY):
            return False  # the FINAL node runs last, after an abort too
        if self.abort_code is not None:
            return True
        return not any(r.state == READY for r in self.runs.values())

    def _others_finished(self) -> bool:
        return all(r.state in (DONE, ERROR, FUTILE) or r is self.final
                   or (self.abort_code is not None and r.state in (READY, NOT_READY))
                   for r in self.runs.values())

    def finish(self) -> int:
        failed = [r for r in self.runs.values() if r.state == ERROR]
        if self.final is not None and self.final.state in (DONE, ERROR):
            # The FINAL node's outcome decides the DAG's (HTCondor's rule).
            ok = self.final.state == DONE
        else:
            ok = not failed and self.abort_code is None
        if self.abort_code is not None:
            self.status = DAG_STATUS_ABORT
        elif failed:
            self.status = DAG_STATUS_NODE_FAILED
        if not ok or self.abort_code is not None:
            self._write_rescue(failed)
        self.changed = True
        self._maybe_write_status(force=True)
        self.out.status_table(self.status, self.runs)
        if ok and self.abort_code is None:
            self.out.write("All jobs Completed!")
            code = EXIT_OKAY
        elif self.abort_code is not None:
            self.out.write(f"Aborting DAG... (exit value {self.abort_code})")
            code = self.abort_code if self.abort_code != 0 else EXIT_ABORT
        else:
            self.out.write("ERROR: the following job(s) failed:")
            for r in failed:
                self.out.write(f"---------------------- Job ----------------------\n      Node Name: {r.node.name}\n"
                               f"   Node Status: STATUS_ERROR\n    Node return val: {r.return_value}\n"
                               f"          Error: {r.details}")
            code = EXIT_ERROR
        if self.jobstate is not None:
            self.jobstate.dagman_finished(code)
        self.out.exiting(code)
        return code

    # ------------------------------------------------------------------ starting nodes
    def _start_ready(self, only_final: bool = False) -> bool:
        ready = sorted((r for r in self.runs.values() if r.state == READY and (r is not self.final or only_final)
                        and r.not_before <= self.clock()), key=lambda r: (-r.node.priority, r.order))
        progressed = False
        budget = int(self.options["DAGMAN_MAX_SUBMITS_PER_INTERVAL"])
        for run in ready:
            if only_final and run is not self.final:
                continue
            if run.node.category and run.node.category in self.dag.maxjobs:
                limit = self.dag.maxjobs[run.node.category]
                if limit and self.category_running(run.node.category) >= limit:
                    continue
            if run.node.pre is not None and not run.node.noop and not run.pre_done:
                cap = int(self.options["DAGMAN_MAX_PRE_SCRIPTS"])
                if cap and self.pre_running >= cap:
                    continue
                self._run_script(run, run.node.pre, PRERUN)
                progressed = True
                continue
            if not self._may_submit():
                break
            if budget <= 0:
                break
            budget -= 1
            self._submit(run)
            progressed = True
        return progressed

    def _may_submit(self) -> bool:
        if self.max_idle and self.idle_procs() >= self.max_idle:
            return False
        cap = int(self.options["DAGMAN_MAX_JOBS_SUBMITTED"])
        return not (cap and self.submitted_clusters() >= cap)

    def _submit(self, run: NodeRun) -> None:
        node = run.node
        if node.noop:
            self.out.write(f"Node {node.name} is a NOOP node; not submitting")
            self._job_finished(run, 0, failed=False)
            return
        self.out.write(f"Submitting HTCondor Node {node.name} job(s)...")
        try:
            cluster, procs = self.submitter.submit(run, self)
        except Exception as exc:  # a bad submit file fails the node, never DAGMan
            self.out.write(f"ERROR: submit attempt failed for node {node.name}: {exc}")
            self._jobstate(run, "SUBMIT_FAILURE", "-")
            run.return_value, run.details = 1, f"submit failed: {exc}"
            self._node_failed(run)
            return
        self.submits += 1
        run.state, run.cluster, run.procs, run.procs_done = SUBMITTED, cluster, procs, 0
        run.ended_procs = set()
        run.idle_procs = set(range(procs))
        run.held_procs = set()
        run.job_failed = False
        self.by_cluster[cluster] = run
        self.out.write(f"\tassigned HTCondor ID ({cluster}.0.0)")

    # ------------------------------------------------------------------ scripts
    def macros(self, run: NodeRun) -> dict[str, str]:
        return {"JOB": run.node.name, "RETRY": str(run.retries_used), "MAX_RETRIES": str(run.node.retries),
                "RETURN": str(run.return_value), "JOBID": f"{run.cluster or 0}.0",
                "DAG_STATUS": str(self.status), "FAILED_COUNT": str(self._failed_count()),
                "NODE_COUNT": str(len(self.runs)), "DAGID": str(self.dagman_id)}

    def _failed_count(self) -> int:
        return sum(1 for r in self.runs.values() if r.state == ERROR)

    def node_dir(self, node: Node) -> Path:
        if not node.directory:
            return self.workdir
        return Path(node.directory) if os.path.isabs(node.directory) else self.workdir / node.directory

    def _run_script(self, run: NodeRun, script: Script, state: int) -> None:
        macros = self.macros(run)
        argv = [_expand(a, macros) for a in [script.executable, *script.arguments]]
        kind = "PRE" if state == PRERUN else "POST"
        self.out.write(f"Running {kind} script of Node {run.node.name}...")
        run.state = state
        cwd = self.node_dir(run.node)
        exe = argv[0] if os.path.isabs(argv[0]) or "/" not in argv[0] and not (cwd / argv[0]).exists() \
            else str(cwd / argv[0])
        self._jobstate(run, f"{kind}_SCRIPT_STARTED", "-" if state == PRERUN else f"{run.cluster or 0}.0")
        # Without DEBUG the script writes where DAGMan does (its job's output and error, the
        # <dag>.lib.out and .lib.err), and wherever its own redirects say; with DEBUG its chosen
        # streams are captured and appended to the DEBUG file when it ends, under a banner.
        capture = ScriptOutput(script, run.node.name, kind, " ".join(argv)) if script.debug_file else None
        try:
            run.script = subprocess.Popen([exe, *argv[1:]], cwd=cwd, stdin=subprocess.DEVNULL,
                                          **(capture.streams() if capture else inherited_streams()))
        except OSError as exc:
            self.out.write(f"ERROR: cannot run {kind} script of node {run.node.name}: {exc}")
            run.script = None
            if capture is not None:
                capture.discard()
            self._script_done(run, state, 1)
            return
        run.script_output = capture
        if state == PRERUN:
            self.pre_running += 1
        else:
            self.post_running += 1

    def _reap_scripts(self) -> bool:
        progressed = False
        for run in self.runs.values():
            if run.script is None:
                continue
            code = run.script.poll()
            if code is None:
                continue
            run.script = None
            if run.script_output is not None:
                run.script_output.finish(self.node_dir(run.node), code)
                run.script_output = None
            if run.state == PRERUN:
                self.pre_running -= 1
            else:
                self.post_running -= 1
                self._post_terminated(run, code)
            self._script_done(run, run.state, code if code >= 0 else 128 - code)
            progressed = True
        # POST scripts waiting for a -maxpost slot.
        for run in self.runs.values():
            if run.state == POSTRUN and run.script is None and run.not_before <= self.clock():
                cap = int(self.options["DAGMAN_MAX_POST_SCRIPTS"])
                if cap and self.post_running >= cap:
                    break
                if run.node.post is not None:
                    self._run_script(run, run.node.post, POSTRUN)
                    progressed = True
        return progressed

    def _script_done(self, run: NodeRun, state: int, code: int) -> None:
        node = run.node
        script = node.pre if state == PRERUN else node.post
        kind = "PRE" if state == PRERUN else "POST"
        self.out.write(f"{kind} Script of Node {node.name} completed successfully." if code == 0
                       else f"{kind} Script of node {node.name} failed with status {code}")
        self._jobstate(run, f"{kind}_SCRIPT_{'SUCCESS' if code == 0 else 'FAILURE'}",
                       "-" if state == PRERUN else f"{run.cluster or 0}.0")
        if script is not None and script.defer_status is not None and code == script.defer_status:
            self.out.write(f"Deferring {kind} script of node {node.name} for {script.defer_time} seconds")
            run.not_before = self.clock() + script.defer_time
            if state == PRERUN:
                run.state = READY
            else:
                run.script = None  # _reap_scripts starts it again when the time comes
            return
        if state == PRERUN:
            if node.pre_skip is not None and code == node.pre_skip:
                self.out.write(f"PRE_SKIP return value {code} of node {node.name}: skipping its job and POST")
                self._set_done(run, f"PRE script exited {code} (PRE_SKIP)")
                return
            if code != 0:
                run.return_value, run.details = code, f"PRE script failed with status {code}"
                if self._check_abort(run, code):
                    run.state = ERROR
                    return
                self._node_failed(run)
                return
            run.state, run.pre_done = READY, True
            if self._may_submit():
                self._submit(run)
            return
        # POST
        if code == 0:
            self._set_done(run, "")
        else:
            run.return_value, run.details = code, f"POST script failed with status {code}"
            if not self._check_abort(run, code):
                self._node_failed(run)
            else:
                run.state = ERROR

    # ------------------------------------------------------------------ events
    def _read_events(self) -> bool:
        assert self._log is not None
        progressed = False
        for event in self._log.events(0):
            if event.type != JobEventType.POST_SCRIPT_TERMINATED:  # (written when the POST ended)
                self._jobstate_event(event)
            progressed |= self._event(event)
        return progressed

    def _jobstate_event(self, event: Any) -> None:
        run = self.by_cluster.get(event.cluster)
        if self.jobstate is not None and run is not None:
            self.jobstate.event(run.node.name, event.type.name, event.cluster, event.proc, int(event.timestamp),
                                self._submit_path(run.node))

    def _jobstate(self, run: NodeRun, name: str, third: str) -> None:
        if self.jobstate is not None:
            self.jobstate.made_up(run.node.name, name, third, self._submit_path(run.node))

    def _submit_path(self, node: Node) -> Path | None:
        return self.node_dir(node) / node.submit_file if node.submit_file and not node.noop else None

    def _post_terminated(self, run: NodeRun, code: int) -> None:
        """The POST script's end, written to the nodes log as HTCondor's DAGMan writes it (event
        016 in the node job's name): recovery reads it back and never runs that POST again."""
        if run.cluster is None:
            return
        now = self.clock()
        body = [f"\t(1) Normal termination (return value {code})" if code >= 0
                else f"\t(0) Abnormal termination (signal {-code})", f"    DAG Node: {run.node.name}"]
        try:
            writer.append(self.nodes_log, writer.event(int(JobEventType.POST_SCRIPT_TERMINATED), run.cluster, 0,
                                                       now, "POST Script terminated.", body))
        except OSError as exc:
            self.out.write(f"ERROR: cannot write the POST script's end to {self.nodes_log}: {exc}")
        if self.jobstate is not None:
            self.jobstate.event(run.node.name, "POST_SCRIPT_TERMINATED", run.cluster, 0, int(now),
                                self._submit_path(run.node))

    def _event(self, event: Any) -> bool:
        run = self.by_cluster.get(event.cluster)
        if run is not None and event.type == JobEventType.POST_SCRIPT_TERMINATED:
            return self._post_event(run, event)
        if run is None or run.state != SUBMITTED:
            return False
        proc, etype = event.proc, event.type
        if proc in run.ended_procs:
            return False  # a repeat of an event delivered again after a crash
        if etype == JobEventType.EXECUTE:
            run.idle_procs.discard(proc)
        elif etype == JobEventType.JOB_EVICTED or etype == JobEventType.JOB_RELEASED:
            run.idle_procs.add(proc)
            run.held_procs.discard(proc)
        elif etype == JobEventType.JOB_HELD:
            run.idle_procs.discard(proc)
            run.held_procs.add(proc)
        elif etype == JobEventType.JOB_TERMINATED:
            run.idle_procs.discard(proc)
            run.held_procs.discard(proc)
            run.ended_procs.add(proc)
            run.procs_done += 1
            if event.get("TerminatedNormally", True):
                value = int(event.get("ReturnValue", 0))
            else:
                value = -int(event.get("TerminatedBySignal", 1))
            if value != 0:
                run.job_failed = True
                run.return_value = value
            if run.procs_done >= run.procs:
                self._job_finished(run, run.return_value if run.job_failed else 0, failed=run.job_failed)
        elif etype == JobEventType.JOB_ABORTED:
            run.idle_procs.discard(proc)
            run.ended_procs.add(proc)
            run.procs_done += 1
            run.job_failed = True
            run.return_value = -1
            run.details = "job was removed"
            if run.procs_done >= run.procs:
                self._job_finished(run, -1, failed=True)
        else:
            return False
        return True

    def _post_event(self, run: NodeRun, event: Any) -> bool:
        """A POST script's end read from the nodes log. Only recovery acts on it: the node's job
        had ended and its POST ran, so the node is done (or failed) without running POST again."""
        if not self._recovering or run.state != POSTRUN or run.script is not None:
            return False  # this DAGMan ran it and has handled it already
        code = int(event.get("ReturnValue", 0)) if event.get("TerminatedNormally", True) \
            else 128 + int(event.get("TerminatedBySignal", 1))
        self.out.write(f"Node {run.node.name}: its POST script already ended (status {code}); not running it again")
        self._script_done(run, POSTRUN, code)
        return True

    def _job_finished(self, run: NodeRun, value: int, *, failed: bool) -> None:
        node = run.node
        run.return_value = value
        self._jobstate(run, "JOB_FAILURE" if failed else "JOB_SUCCESS", str(value))
        self.out.write(f"Node {node.name} job proc ({run.cluster}.0.0) completed successfully." if not failed
                       else f"Node {node.name} job proc ({run.cluster}.0.0) failed with ReturnValue {value}.")
        if not node.post and self._check_abort(run, value):
            run.state = ERROR
            return
        if node.post is not None and not node.noop:
            run.state = POSTRUN
            run.script = None
            run.not_before = 0.0
            return  # _reap_scripts starts it within -maxpost
        if failed:
            run.details = run.details or f"Job failed with ReturnValue {value}"
            self._node_failed(run)
        else:
            self._set_done(run, "")

    def _check_abort(self, run: NodeRun, value: int) -> bool:
        node = run.node
        if node.abort_on is None or value != node.abort_on:
            return False
        code = node.abort_return if node.abort_return is not None else value
        self.out.write(f"Aborting DAG because we got the ABORT exit value from a node ({node.name}: {value})")
        run.details = f"ABORT-DAG-ON value {value}"
        self.abort_code = code
        self.status = DAG_STATUS_ABORT
        self._remove_running("DAG Abort: DAG is exiting and writing rescue file.")
        return True

    def _remove_running(self, reason: str) -> None:
        clusters = [r.cluster for r in self.runs.values() if r.state == SUBMITTED and r.cluster is not None]
        if clusters:
            self.out.write(f"Removing {len(clusters)} submitted node job(s): {reason}")
            try:
                self.submitter.remove(clusters, reason)
            except Exception as exc:
                self.out.write(f"ERROR: removing node jobs failed: {exc}")
        for r in self.runs.values():
            if r.state == SUBMITTED:
                r.state, r.details = ERROR, "removed by DAGMan"
                r.idle_procs.clear()
            if r.script is not None:
                r.script.kill()

    def remove_all(self) -> None:
        """DAGMan was told to stop (its job removed): remove the node jobs, write the rescue DAG."""
        self.status = DAG_STATUS_RM
        self.abort_code = EXIT_ABORT if self.abort_code is None else self.abort_code
        self._remove_running("DAG Removed")

    # ------------------------------------------------------------------ outcomes
    def _set_done(self, run: NodeRun, details: str) -> None:
        run.state, run.details = DONE, details
        run.idle_procs.clear()
        self.out.write(f"Node {run.node.name} succeeded." if not details else f"Node {run.node.name} done: {details}")
        for child in run.node.children:
            c = self.runs[child]
            c.waiting -= 1
            if c.waiting == 0 and c.state == NOT_READY:
                c.state = READY

    def _node_failed(self, run: NodeRun) -> None:
        node = run.node
        unless = node.retry_unless_exit
        if run.retries_used < node.retries and not (unless is not None and run.return_value == unless):
            run.retries_used += 1
            self.out.write(f"Retrying node {node.name} (retry #{run.retries_used} of {node.retries})...")
            if self.jobstate is not None:
                self.jobstate.retried(node.name)
            run.state, run.cluster, run.pre_done = READY, None, False
            run.idle_procs.clear()
            return
        run.state = ERROR
        self.status = DAG_STATUS_NODE_FAILED
        self.out.write(f"Node {node.name} failed: {run.details}")
        for desc in self._descendants(node.name):
            r = self.runs[desc]
            if r.state in (NOT_READY, READY):
                r.state = FUTILE

    def _descendants(self, name: str) -> set[str]:
        seen: set[str] = set()
        stack = list(self.runs[name].node.children)
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(self.runs[n].node.children)
        return seen

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        """Rebuild the nodes' states from the nodes log: which cluster is which node (the submit
        events' "DAG Node:" notes), which ended how, which still run. Nothing in the queue or
        done is submitted again."""
        assert self._log is not None
        by_cluster: dict[int, str] = {}
        attempts: dict[str, int] = {}
        submitted: set[tuple[int, int]] = set()
        for event in self._log.events(0):
            if event.type == JobEventType.SUBMIT:
                if (event.cluster, event.proc) in submitted:
                    continue  # a repeat of a submit event delivered again after a crash
                submitted.add((event.cluster, event.proc))
                notes = str(event.get("LogNotes", ""))
                if notes.startswith("DAG Node: "):
                    name = notes.removeprefix("DAG Node: ").strip()
                    run = self.runs.get(name)
                    if run is None:
                        continue
                    if event.proc == 0:
                        attempts[name] = attempts.get(name, 0) + 1
                        by_cluster[event.cluster] = name
                        run.state, run.cluster = SUBMITTED, event.cluster
                        run.procs, run.procs_done, run.job_failed = 0, 0, False
                        run.ended_procs = set()
                        run.idle_procs, run.held_procs = set(), set()
                        self.by_cluster[event.cluster] = run
                        run.retries_used = attempts[name] - 1
                    run.procs += 1
                    run.idle_procs.add(event.proc)
                self._jobstate_event(event)
                continue
            self._jobstate_event(event)
            self._event(event)
        for run in self.runs.values():
            if run.state == SUBMITTED:
                self.out.write(f"Node {run.node.name}: job {run.cluster} is still in the queue; following it")
        # Children of nodes recovered DONE were made READY by _set_done; states past READY stay.

    # ------------------------------------------------------------------ files
    def _maybe_write_status(self, force: bool = False) -> None:
        if self.dag.node_status_file is None:
            return
        now = self.clock()
        due = now - self.last_status_write >= self.dag.node_status_interval
        if force or (due and (self.changed or self.dag.node_status_always)):
            write_node_status(self.workdir / self.dag.node_status_file, self.dag_file, self.status, self.runs,
                              now, now + self.dag.node_status_interval)
            self.last_status_write = now
            self.changed = False

    def _write_rescue(self, failed: list[NodeRun]) -> None:
        from gridbus.dag.writer import rescue_text

        limit = int(self.options["DAGMAN_MAX_RESCUE_NUM"])
        if limit <= 0:
            return
        number = min(newest_rescue_number(self.dag_file) + 1, limit)
        path = Path(f"{self.dag_file}.rescue{number:03d}")
        done = {name for name, r in self.runs.items() if r.state == DONE}
        path.write_text(rescue_text(self.dag_file.name, [r.node for r in self.runs.values()], done,
                                    [r.node.name for r in failed], self.premarked))
        self.out.write(f"Writing Rescue DAG file {path.name}")


def newest_rescue_number(dag_file: Path) -> int:
    """The highest NNN of ``<dag>.rescueNNN`` next to the DAG file (0 when there is none)."""
    best = 0
    for p in Path(dag_file).parent.glob(Path(dag_file).name + ".rescue[0-9][0-9][0-9]"):
        best = max(best, int(p.name[-3:]))
    return best


def _expand(text: str, macros: dict[str, str]) -> str:
    """A script argument's $JOB, $RETRY, $RETURN, ... macros (longest names first)."""
    if "$" not in text:
        return text
    for name in sorted(macros, key=len, reverse=True):
        text = text.replace("$" + name, macros[name])
    return text


def is_subdag(node: Node) -> bool:
    return node.kind == SUBDAG


def is_final(node: Node) -> bool:
    return node.kind == FINAL
