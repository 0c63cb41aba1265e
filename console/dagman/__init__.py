"""DAGMan, a client program: it runs a DAG of jobs by submitting them to a schedd through the
console's `Schedd`, as condor_dagman does, and `DAGMan` is htcondor2's handle on a running one.

The schedd starts it as the DAGMan job (a scheduler-universe job whose submit commands
`gridbus.dag.dagmanjob` makes): ``python -m gridbus.console.dagman -Dag file.dag ...``.

- `main`: the program (condor_dagman's command line, the lock file, rescue DAGs and recovery, the
  submitter that reaches the schedd);
- `engine`: the loop that walks the DAG's nodes through their states;
- `noderun`: the node and DAG states and what DAGMan knows of one node while it runs;
- `scripts`: where a PRE or POST script's output goes (DAGMan's own streams, or a DEBUG file);
- `outputs`: the files DAGMan writes beside the DAG (dagman.out, node status, DOT);
- `jobstate`: the JOBSTATE_LOG;
- `control`: htcondor2.DAGMan, the handle that sends commands to a running DAGMan.
"""

from gridbus.console.dagman.control import DAGMan

__all__ = ["DAGMan"]
