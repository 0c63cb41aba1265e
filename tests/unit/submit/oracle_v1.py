"""HTCondor's own submit code as the oracle: run under htcondor==24.0.24 (its version-1 module).

    .venv-htcondor24/bin/python -W ignore oracle_v1.py CORPUS_DIR WORKDIR CLUSTER QDATE

Prints one JSON object: {file name: {"jobs": [{attr: ClassAd text}, ...]} or {"error": message}}.
It runs in its own interpreter because htcondor 24 and 25 cannot share a process.

The Python binding's Submit reads a description only up to its first queue statement (includes
and if/else are HTCondor's own), while condor_submit goes on: each further queue statement makes
more procs, numbered on, with the commands above it in effect. For a file with several queue
statements the oracle does what condor_submit's loop does, with HTCondor's parser for each step:
for the k-th queue line it parses the file up to that line with the earlier queue lines turned into
comments, and a sentinel command after it; when the sentinel shows up in the ads (or the parser
reaches the end inside an if), it never stopped at that queue line (it sits in a branch not taken)
and that line makes no jobs.
"""

import json
import os
import re
import sys

import htcondor  # v1, from the 24.0.x wheel

_QUEUE = re.compile(r"^\s*queue(\s|$)", re.I)
_SENTINEL = "OracleSentinelNotAJob"

corpus, workdir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
cluster, qdate = int(sys.argv[3]), int(sys.argv[4])
os.chdir(workdir)


def _ads(jobs):
    return [{k: str(ad.lookup(k)) for k in ad.keys()} for ad in jobs]


def _every_queue_statement(text):
    lines = text.splitlines()
    queue_lines = [i for i, line in enumerate(lines) if _QUEUE.match(line)]
    out, next_proc = [], 0
    for k in queue_lines:
        head = ["# " + line if i in queue_lines and i != k else line for i, line in enumerate(lines[: k + 1])]
        try:
            jobs = list(htcondor.Submit("\n".join(head + [f"+{_SENTINEL} = 1", ""])).jobs(
                clusterid=cluster, procid=next_proc, qdate=qdate))
        except Exception as exc:
            if "endif(s) not found" in str(exc):
                continue  # the parser ran past this queue line into an unclosed if: a branch not taken
            raise
        if any(_SENTINEL in ad for ad in jobs):
            continue  # the parser ran past this queue line: it is in a branch not taken
        out += _ads(jobs)
        next_proc += len(jobs)
    return out


out = {}
for name in sorted(os.listdir(corpus)):
    if not name.endswith(".sub"):
        continue
    with open(os.path.join(corpus, name)) as f:
        text = f.read()
    try:
        if sum(1 for line in text.splitlines() if _QUEUE.match(line)) > 1:
            out[name] = {"jobs": _every_queue_statement(text)}
        else:
            out[name] = {"jobs": _ads(htcondor.Submit(text).jobs(clusterid=cluster, qdate=qdate))}
    except Exception as exc:  # the oracle's refusal is a result too
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}
json.dump(out, sys.stdout)
