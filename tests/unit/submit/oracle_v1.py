"""HTCondor's own submit code as the oracle: run under htcondor==24.0.24 (its version-1 module).

    .venv-htcondor24/bin/python -W ignore oracle_v1.py CORPUS_DIR WORKDIR CLUSTER QDATE

Prints one JSON object: {file name: {"jobs": [{attr: ClassAd text}, ...]} or {"error": message}}.
It runs in its own interpreter because htcondor 24 and 25 cannot share a process
(reference/HTCONDOR-NOTES.md 1.5).
"""

import json
import os
import sys

import htcondor  # v1, from the 24.0.x wheel

corpus, workdir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
cluster, qdate = int(sys.argv[3]), int(sys.argv[4])
os.chdir(workdir)
out = {}
for name in sorted(os.listdir(corpus)):
    if not name.endswith(".sub"):
        continue
    with open(os.path.join(corpus, name)) as f:
        text = f.read()
    try:
        jobs = htcondor.Submit(text).jobs(clusterid=cluster, qdate=qdate)
        out[name] = {"jobs": [{k: str(ad.lookup(k)) for k in ad.keys()} for ad in jobs]}
    except Exception as exc:  # the oracle's refusal is a result too
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}
json.dump(out, sys.stdout)
