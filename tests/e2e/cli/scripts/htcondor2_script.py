"""A script written for htcondor2; the test runs it with only its imports changed to gridbus."""

import sys

import htcondor2 as htcondor
from htcondor2 import JobEventLog, JobEventType, Schedd, Submit

log = sys.argv[1]
sub = Submit({"executable": "/bin/echo", "arguments": "$(Item)", "output": "out.$(ProcId)", "log": log})
sub.setQArgs("Item in (alpha, beta, gamma)")
schedd = Schedd()
result = schedd.submit(sub)
cluster, n = result.cluster(), result.num_procs()
print("submitted", cluster, result.first_proc(), n)

finished = set()
for event in JobEventLog(log).events(stop_after=60):
    if event.cluster == cluster and event.type == JobEventType.JOB_TERMINATED:
        finished.add(event.proc)
        print("terminated", event.proc, event["ReturnValue"])
    if len(finished) == n:
        break

held = schedd.submit(Submit("executable = /bin/sleep\narguments = 300\nhold = true\nqueue 1\n"))
ads = schedd.query(constraint=f"ClusterId == {held.cluster()}", projection=["ProcId", "JobStatus"])
print("held", [(ad["ProcId"], ad["JobStatus"]) for ad in ads], htcondor.JobStatus(ads[0]["JobStatus"]).name)
schedd.act(htcondor.JobAction.Remove, f"ClusterId == {held.cluster()}")
history = schedd.history(f"ClusterId == {cluster}", ["ProcId", "ExitCode"])
print("history", sorted((ad["ProcId"], ad["ExitCode"]) for ad in history))
