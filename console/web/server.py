"""The console's HTTP side (aiohttp): the pages, their JSON, the live stream, /metrics.

- ``/`` and ``/static/*``: one page (static/index.html and app.js) that draws the pool's slots,
  the queue per owner and per DAG, a job's ad and events, users and priorities, the daemons.
- ``/api/*``: JSON for those views. Sign-in (``POST /api/login``) sets an HttpOnly, SameSite
  cookie; every other /api route needs it. Job data and job actions are calls made as the
  signed-in user through the console API (users.UserConsole), so the schedd decides what each
  user may do; the slots, daemons and submitters come from the ads the daemon holds (ads every
  user of the pool may read on the bus anyway).
- ``/api/stream``: server-sent events. A page holds one stream; the daemon writes ``change``
  with the topics that changed (coalesced, at most one per STREAM_COALESCE seconds) when an ad or
  an event comes from the bus, and the page fetches only the view it shows. No page polls. A
  page showing a job opens its stream with ``?watch=<owner>``: that owner's job events are bound
  for as long as the stream lasts (agent.WebDaemon.watch_owner).
- ``/metrics``: Prometheus's text format (metrics.PoolCollector), open as an exporter's is; bind
  WEB_ADDRESS to an address only the scraper reaches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from gridbus.bus import BrokerURL
from gridbus.console.negotiator import Negotiator
from gridbus.console.schedd import JobAction, QueryOpt, Schedd
from gridbus.console.web.metrics import PoolCollector
from gridbus.console.web.picture import Picture
from gridbus.console.web.users import (
    SignInRefused,
    SignIns,
    UserConsole,
    check_credentials,
    describe,
)
from gridbus.errors import HTCondorPermissionError, HTCondorValueError
from gridbus.eventlog import parse_event

log = logging.getLogger("gridbus.web")

STATIC = Path(__file__).with_name("static")
COOKIE = "gridbus_web"
STREAM_COALESCE = 1.0  # seconds: the changes within reach a page as one (a person needs no more than one redraw a second)
STREAM_KEEPALIVE = 20.0  # seconds between comments on a quiet stream (proxies close idle ones)
JOB_ID = re.compile(r"\d+\.\d+")
ACTIONS = {"hold": JobAction.Hold, "release": JobAction.Release, "remove": JobAction.Remove}
HISTORY_SHOWN = 20  # recently finished jobs the queue view lists
# Jobs of one schedd the queue view lists at most (a screenful or two): a page is redrawn at each
# change of the queue,
# and a listing of 100,000 jobs is a cost to the schedd and no use to a person (the Submitter ads'
# totals, on the users page, count them all).
QUEUE_SHOWN = 100
# Attributes of a job the queue view lists (condor_q's columns, and what it groups by).
QUEUE_ATTRS = ["ClusterId", "ProcId", "Owner", "JobStatus", "QDate", "EnteredCurrentStatus", "Cmd", "Args",
               "Arguments", "DAGManJobId", "DAGNodeName", "HoldReason", "RemoteHost", "JobBatchName",
               "CompletionDate", "ExitCode"]


def _job_row(ad: Any) -> dict[str, Any]:
    return {k: _plain(ad.get(k)) for k in QUEUE_ATTRS if ad.get(k) is not None}


def log_history(text: str, cluster: int, proc: int) -> list[dict[str, Any]]:
    """The events of job ``cluster.proc`` in a user log's text, oldest first, each as
    ``{"event": its name (as the event log calls it), "time": seconds}``; a duplicate that a
    schedd's crash left (the same event at the same second) is shown once."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    for chunk in text.split("\n...\n"):
        if not chunk.strip():
            continue
        try:
            event = parse_event(chunk.strip("\n") + "\n")
        except (ValueError, KeyError):
            continue  # a part a reader cannot take (a torn last write): the rest still shows
        if (event.cluster, event.proc) != (cluster, proc) or (int(event.type), event.timestamp) in seen:
            continue
        seen.add((int(event.type), event.timestamp))
        out.append({"event": event.type.name.lower(), "time": event.timestamp})
    return out


def _plain(value: Any) -> Any:
    """A ClassAd value as JSON can carry it (an expression as its text)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


async def _nothing(owner: str) -> None:
    return None


class WebApp:
    def __init__(self, picture: Picture, pool_url: BrokerURL, *, call_timeout: float = 30.0,
                 watch: Callable[[str], Awaitable[None]] = _nothing,
                 unwatch: Callable[[str], Awaitable[None]] = _nothing):
        self.picture = picture
        self.watch, self.unwatch = watch, unwatch
        self.pool_url = pool_url
        self.call_timeout = call_timeout
        self.sign_ins = SignIns()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(PoolCollector(picture))
        self.streams: set[asyncio.Queue[set[str]]] = set()
        self.stats = {"Scrapes": 0, "StreamsOpen": 0, "PageCalls": 0}
        picture.listeners.append(self._changed)
        self.app = web.Application(middlewares=[self._errors])
        self.app.add_routes([
            web.get("/", self.index),
            web.static("/static", STATIC),
            web.get("/metrics", self.metrics),
            web.post("/api/login", self.login),
            web.post("/api/logout", self.logout),
            web.get("/api/me", self.me),
            web.get("/api/stream", self.stream),
            web.get("/api/slots", self.slots),
            web.get("/api/daemons", self.daemons),
            web.get("/api/users", self.users),
            web.get("/api/queue", self.queue),
            web.get("/api/job", self.job),
            web.post("/api/job/action", self.action),
        ])
        self.app.on_shutdown.append(self._on_shutdown)

    # ------------------------------------------------------------------ plumbing
    @web.middleware
    async def _errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as exc:  # a page's call failed: say why, never a bare 500
            log.warning("%s %s failed: %r", request.method, request.path, exc)
            return web.json_response({"error": describe(exc)}, status=502)

    def _changed(self, topics: set[str]) -> None:
        for queue in self.streams:
            queue.put_nowait(topics)

    async def _on_shutdown(self, app: web.Application) -> None:
        for queue in list(self.streams):
            queue.put_nowait({"__closed__"})
        self.sign_ins.close()

    def _user(self, request: web.Request) -> UserConsole:
        console = self.sign_ins.get(request.cookies.get(COOKIE))
        if console is None:
            raise web.HTTPUnauthorized(text=json.dumps({"error": "sign in first"}), content_type="application/json")
        return console

    @staticmethod
    async def _form(request: web.Request, what: str) -> dict[str, Any]:
        """The JSON object a POST sends; a form of another type (one a page of another site
        could send) or anything but an object is refused with a sentence."""
        if request.content_type != "application/json":
            raise web.HTTPUnsupportedMediaType(text=json.dumps({"error": f"send {what} as application/json"}),
                                               content_type="application/json")
        try:
            form = await request.json()
        except ValueError:
            form = None
        if not isinstance(form, dict):
            raise web.HTTPBadRequest(text=json.dumps({"error": f"send {what} as a JSON object"}),
                                     content_type="application/json")
        return form

    async def _as_user(self, console: UserConsole, fn: Any) -> Any:
        self.stats["PageCalls"] += 1
        return await console.run(fn)

    # ------------------------------------------------------------------ pages and sign-in
    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    async def metrics(self, request: web.Request) -> web.Response:
        self.stats["Scrapes"] += 1
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def login(self, request: web.Request) -> web.Response:
        form = await self._form(request, "the user name and password")
        user, password = str(form.get("user", "")).strip(), str(form.get("password", ""))
        try:
            url = await check_credentials(self.pool_url, user, password)
        except SignInRefused as exc:
            log.info("sign-in of %r refused: %s", user, exc)
            return web.json_response({"error": str(exc)}, status=403)
        console = self.sign_ins.add(UserConsole(user, url, self.call_timeout))
        log.info("%s signed in", user)
        response = web.json_response({"user": user})
        response.set_cookie(COOKIE, console.token, httponly=True, samesite="Strict", path="/")
        return response

    async def logout(self, request: web.Request) -> web.Response:
        self.sign_ins.remove(request.cookies.get(COOKIE))
        response = web.json_response({})
        response.del_cookie(COOKIE, path="/")
        return response

    async def me(self, request: web.Request) -> web.Response:
        return web.json_response({"user": self._user(request).user})

    # ------------------------------------------------------------------ the live stream
    async def stream(self, request: web.Request) -> web.StreamResponse:
        self._user(request)
        owner = request.query.get("watch", "")[:200]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        queue: asyncio.Queue[set[str]] = asyncio.Queue()
        self.streams.add(queue)
        self.stats["StreamsOpen"] = len(self.streams)
        if owner:
            await self.watch(owner)
        try:
            await response.write(b"event: hello\ndata: {}\n\n")
            while True:
                try:
                    topics = await asyncio.wait_for(queue.get(), STREAM_KEEPALIVE)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
                await asyncio.sleep(STREAM_COALESCE)  # what comes meanwhile goes in the same message
                while not queue.empty():
                    topics |= queue.get_nowait()
                if "__closed__" in topics:
                    break
                data = json.dumps({"topics": sorted(topics)})
                await response.write(f"event: change\ndata: {data}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.streams.discard(queue)
            self.stats["StreamsOpen"] = len(self.streams)
            if owner:
                await self.unwatch(owner)
        return response

    # ------------------------------------------------------------------ views from the ads
    async def slots(self, request: web.Request) -> web.Response:
        self._user(request)
        keep = ("Name", "Machine", "State", "Activity", "Cpus", "Memory", "Disk", "GPUs", "SlotType", "RemoteOwner",
                "JobId", "LoadAvg", "EnteredCurrentActivity", "HasDocker", "DockerVersion", "StartdName")
        rows = [{k: _plain(ad[k]) for k in keep if k in ad} for ad in self.picture.of_type("Machine")]
        return web.json_response({"slots": rows})

    async def daemons(self, request: web.Request) -> web.Response:
        self._user(request)
        masters = [{"Name": ad.get("Name"), "Machine": ad.get("Machine"), "Daemons": _plain(ad.get("Daemons", []))}
                   for ad in self.picture.of_type("Master")]
        return web.json_response({"daemons": self.picture.daemons(), "masters": masters})

    async def users(self, request: web.Request) -> web.Response:
        console = self._user(request)
        submitters = [{k: ad.get(k) for k in ("Name", "Owner", "ScheddName", "IdleJobs", "RunningJobs", "HeldJobs")}
                      for ad in self.picture.of_type("Submitter")]
        priorities: list[dict[str, Any]] = []
        error = ""
        negotiators = self.picture.of_type("Negotiator")
        if negotiators:
            name = str(negotiators[0].get("Name"))
            try:
                found = await self._as_user(console, lambda s: Negotiator(name=name, session=s).getPriorities())
                priorities = [{k: _plain(v) for k, v in p.items()} for p in found]
            except Exception as exc:
                error = describe(exc)
        return web.json_response({"submitters": submitters, "priorities": priorities, "error": error})

    # ------------------------------------------------------------------ views made as the user
    def _schedd_addresses(self, wanted: str | None = None) -> list[str]:
        found = sorted(str(ad.get("MyAddress")) for ad in self.picture.of_type("Scheduler") if ad.get("MyAddress"))
        if wanted:
            if wanted not in found:
                raise web.HTTPNotFound(text=json.dumps({"error": f"no schedd {wanted} in the pool"}),
                                       content_type="application/json")
            return [wanted]
        return found

    async def queue(self, request: web.Request) -> web.Response:
        console = self._user(request)
        everyone = request.query.get("all") in ("1", "true")
        out: list[dict[str, Any]] = []
        for address in self._schedd_addresses(request.query.get("schedd")):
            def listing(session: Any, address: str = address) -> tuple[list[Any], list[Any]]:
                schedd = Schedd(address, session=session)
                mine = f"Owner == {json.dumps(console.user)}"
                opts = QueryOpt.Default if everyone else QueryOpt.DefaultMyJobsOnly
                jobs = schedd.query("true", QUEUE_ATTRS, limit=QUEUE_SHOWN, opts=opts)
                done = schedd.history("true" if everyone else mine, QUEUE_ATTRS, HISTORY_SHOWN)
                return jobs, done

            jobs, done = await self._as_user(console, listing)
            out.append({"schedd": address, "jobs": [_job_row(j) for j in jobs], "history": [_job_row(j) for j in done],
                        "limit": QUEUE_SHOWN})
        return web.json_response({"user": console.user, "all": everyone, "schedds": out})

    def _job_ref(self, schedd: str | None, job_id: str | None) -> tuple[str, str]:
        if not job_id or not JOB_ID.fullmatch(job_id):
            raise web.HTTPBadRequest(text=json.dumps({"error": f"{job_id!r} is not a job id (cluster.proc)"}),
                                     content_type="application/json")
        return self._schedd_addresses(schedd or None)[0] if schedd or self._schedd_addresses() else "", job_id

    async def job(self, request: web.Request) -> web.Response:
        console = self._user(request)
        address, job_id = self._job_ref(request.query.get("schedd"), request.query.get("id"))
        if not address:
            return web.json_response({"error": "no schedd in the pool"}, status=404)
        try:
            ad = await self._as_user(console, lambda s: Schedd(address, session=s).get_ad(job_id))
        except HTCondorValueError as exc:
            return web.json_response({"error": describe(exc)}, status=404)
        except HTCondorPermissionError as exc:
            return web.json_response({"error": describe(exc)}, status=403)
        cluster, proc = (int(x) for x in job_id.split("."))
        history: list[dict[str, Any]] = []
        if ad.get("UserLog"):
            # The job's record before this page: its user log, fetched as the user (the schedd's
            # Fetch, read by the owner's shadow), as HTCondor's answer for what happened.
            try:
                text = await self._as_user(console, lambda s: Schedd(address, session=s).fetch(job_id, "UserLog"))
                history = log_history(text, cluster, proc)
            except (HTCondorValueError, HTCondorPermissionError) as exc:
                log.info("%s: the user log of %s not read: %s", console.user, job_id, describe(exc))
        events = [{k: _plain(v) for k, v in e.items()} for e in self.picture.job_events(address, cluster, proc)]
        return web.json_response({"schedd": address, "id": job_id, "ad": {k: _plain(ad[k]) for k in ad.keys()},
                                  "history": history, "events": events})

    async def action(self, request: web.Request) -> web.Response:
        console = self._user(request)
        form = await self._form(request, "the action")
        what = str(form.get("action", "")).lower()
        if what not in ACTIONS:
            return web.json_response({"error": f"the action must be one of {', '.join(ACTIONS)}, not {what!r}"},
                                     status=400)
        address, job_id = self._job_ref(form.get("schedd"), form.get("id"))
        reason = f"by {console.user} from the web console"
        try:
            totals = await self._as_user(console, lambda s: Schedd(address, session=s).act(ACTIONS[what], job_id, reason))
        except HTCondorPermissionError as exc:
            log.info("%s: %s %s refused: %s", console.user, what, job_id, exc)
            return web.json_response({"error": describe(exc)}, status=403)
        except HTCondorValueError as exc:
            return web.json_response({"error": describe(exc)}, status=400)
        log.info("%s: %s %s", console.user, what, job_id)
        return web.json_response({"totals": {k: _plain(totals[k]) for k in totals.keys()}})
