"""The owner's shadow: the process that touches a user's files for the schedd, as that user.

Started by ``owner_shadow.py`` under the owner's Unix account and fed over a pipe: one JSON
request a line on stdin, one JSON answer a line on stdout. It imports nothing of gridbus (it is
run as ``python -I -c <this file>``, so the owner need not read the schedd's installation) and
knows nothing the schedd knows: no configuration, no broker credentials, only the requests.

Requests: ``{"op": "read", "path", "start", "end", "max"}`` answers ``{"ok": true, "data"}``;
``{"op": "append", "path", "text"}`` answers ``{"ok": true}``; ``{"op": "whoami"}`` answers the
uid. A failure answers ``{"ok": false, "errno", "error"}``: the operating system's word, as the
owner.
"""

import json
import os
import sys


def _read(req):
    path, start, end, most = req["path"], int(req["start"]), int(req["end"]), int(req["max"])
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if start < 0:
            first = max(0, size + start)
            last = size + end if end < 0 else size
        else:
            first = start
            last = end if end > 0 else size
        last = min(last, size, first + most)
        fh.seek(first)
        data = fh.read(max(0, last - first))
    return {"ok": True, "data": data.decode("utf-8", "replace")}


def _append(req):
    # O_APPEND: each write lands whole at the end, as the schedd's own writer did.
    fd = os.open(req["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = req["text"].encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return {"ok": True}


def serve(stdin, stdout):
    for line in stdin:
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "read":
                answer = _read(req)
            elif op == "append":
                answer = _append(req)
            elif op == "whoami":
                answer = {"ok": True, "uid": os.geteuid()}
            else:
                answer = {"ok": False, "errno": 0, "error": f"unknown request {op!r}"}
        except OSError as exc:
            answer = {"ok": False, "errno": exc.errno or 0, "error": exc.strerror or str(exc)}
        except Exception as exc:  # a bad request must not end the shadow
            answer = {"ok": False, "errno": 0, "error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
