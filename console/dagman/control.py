"""htcondor2.DAGMan: the client that sends commands (halt, resume, throttle) to a running DAGMan.

gridbus's DAGMan (gridbus.console.dagman.main) takes its throttles from its command line and configuration
when it starts and listens for no command while it runs, so each command answers failure as
htcondor2's does when it cannot reach the DAGMan: ``(False, reason)`` from halt and resume, the
reason from throttle. The reason says what to do instead: pass the throttles to ``gridbus submit_dag``
(-maxidle, -maxjobs, -maxpre, -maxpost) or set them in the DAG's configuration file, and remove
the DAGMan job to stop the DAG (DAGMan then writes a rescue DAG, from which a new submission goes on).
"""

from __future__ import annotations

from gridbus.classad import ClassAd
from gridbus.errors import HTCondorTypeError

NO_COMMANDS = ("gridbus's DAGMan takes no commands while it runs: give throttles at submission (-maxidle, "
               "-maxjobs, -maxpre, -maxpost) or in the DAG's configuration file; to stop the DAG, remove its "
               "DAGMan job (gridbus rm {id}), which writes a rescue DAG to go on from")

# htcondor2's throttle arguments and the DAGMan ad attributes they set.
THROTTLE_ATTRS = {
    "max_nodes": "DAGMan_MaxJobs",
    "max_idle": "DAGMan_MaxIdle",
    "max_pre": "DAGMan_MaxPreScripts",
    "max_hold": "DAGMan_MaxHoldScripts",
    "max_post": "DAGMan_MaxPostScripts",
    "max_submits": "DAGMan_MaxSubmitsPerInterval",
}


class DAGMan:
    """A handle on the DAGMan job whose ClusterId is ``dag_id`` (htcondor2.DAGMan)."""

    def __init__(self, dag_id: int) -> None:
        if isinstance(dag_id, bool) or not isinstance(dag_id, int):
            raise HTCondorTypeError("dag_id must be an integer")
        self._dag_id = dag_id

    @property
    def dag_id(self) -> int:
        """The ClusterId of the DAGMan job this object sends commands to."""
        return self._dag_id

    def _refusal(self) -> str:
        return NO_COMMANDS.format(id=self._dag_id)

    def halt(self, reason: str | None = None, pause: bool | None = None) -> tuple[bool, str]:
        """Ask DAGMan to halt the DAG: answers (False, why not) on gridbus."""
        if reason is not None and not isinstance(reason, str):
            raise HTCondorTypeError("reason must be a string")
        return (False, self._refusal())

    def resume(self) -> tuple[bool, str]:
        """Ask DAGMan to resume a halted DAG: answers (False, why not) on gridbus."""
        return (False, self._refusal())

    def throttle(self, **kwargs: int) -> ClassAd | str:
        """Set DAGMan's throttles (max_nodes, max_idle, max_pre, max_hold, max_post, max_submits):
        answers why not on gridbus, or htcondor2's sentence when none is given."""
        # As htcondor2: other keywords are ignored, and none of these is "No valid throttle".
        if all(kwargs.get(name) is None for name in THROTTLE_ATTRS):
            return "No valid throttle specified"
        return self._refusal()

    def __repr__(self) -> str:
        return f"DAGMan({self._dag_id})"
