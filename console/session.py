"""The QMF-style console session, synchronous on pika.

    from gridbus.console import Session
    session = Session("amqp://alice:secret@broker/")          # or Session(); session.addBroker(url)
    schedd = session.getObjects(_class="scheduler")[0]
    result = schedd.Submit(ad)                                # .status, .text, .outArgs, .ClusterId

A session is one broker connection and is not thread-safe: use one per thread. Every call has a
timeout, and a timeout error names the agent and the method.
"""

from __future__ import annotations

import time
from typing import Any

import pika
import pika.exceptions

from gridbus import bus, protocol, tls, wire
from gridbus.errors import HTCondorConnectionError, HTCondorTypeError
from gridbus.rpc import (
    DEFAULT_TIMEOUT,
    CallTimeout,
    MethodResult,
    Reply,
    answer_of,
    method_body,
    new_correlation_id,
    query_body,
)

# What a lost broker connection raises in pika's blocking adapter.
_CONNECTION_LOST = (
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.ConnectionClosed,
    pika.exceptions.StreamLostError,
    pika.exceptions.ChannelWrongStateError,
    pika.exceptions.ConnectionWrongStateError,
)


class BrokerUnreachable(HTCondorConnectionError):
    """The broker did not accept a connection; the message names the URL (without password)."""


class Session:
    """A console's session with one broker (QMF's `qmf.console.Session`)."""

    def __init__(self, url: str | None = None, *, timeout: float = DEFAULT_TIMEOUT, name: str = "console"):
        self.timeout = timeout
        self.name = name
        self.url: bus.BrokerURL | None = None
        self._connection: pika.BlockingConnection | None = None
        self._channel: Any = None
        self._pending: dict[str, dict[str, Reply]] = {}
        self._connect_timeout: float = 10
        self._broker = 0  # index of the broker in use among those the URL lists
        if url is not None:
            self.addBroker(url)

    # ------------------------------------------------------------------ connection
    def addBroker(self, target: str | None = None, timeout: float | None = None) -> Session:
        """Connect to the broker at ``target`` (an amqp:// or amqps:// URL; default GRIDBUS_URL).

        The URL may list several brokers (the nodes of a cluster): the first that answers is used,
        and a call that loses its connection moves to the next (see `call`)."""
        if not target:
            from gridbus import personal

            target = personal.console_url(bus.default_url())  # in a personal pool, as its Unix user
        self.url = bus.BrokerURL(target)
        self._connect_timeout = timeout or 10
        self._broker = 0
        self._connect()
        return self

    def _connect(self) -> None:
        """Connect to the first broker that answers, from the current one on in the list."""
        assert self.url is not None
        alternatives = self.url.alternatives
        last: BaseException | None = None
        for i in range(len(alternatives)):
            index = (self._broker + i) % len(alternatives)
            broker = alternatives[index]
            params = pika.URLParameters(broker.url)
            params.ssl_options = tls.pika_ssl_options(broker.url, broker.host)  # amqps (gridbus/tls.py)
            params.client_properties = {"connection_name": f"gridbus {self.name}@{_host()}"}
            params.socket_timeout = self._connect_timeout
            params.blocked_connection_timeout = 60
            try:
                self._connection = pika.BlockingConnection(params)
            except pika.exceptions.ProbableAuthenticationError as exc:
                raise BrokerUnreachable(f"broker at {broker.redacted()} refused the credentials of {broker.user!r}") from exc
            except pika.exceptions.AMQPError as exc:
                last = exc
                continue
            self._broker = index
            break
        else:
            raise BrokerUnreachable(f"cannot reach the broker at {self.url.redacted()}: {last!r}") from last
        self._open_channel()

    def _open_channel(self) -> None:
        assert self._connection is not None
        self._channel = self._connection.channel()
        # Publisher confirms: a request the broker did not take (a node failing, a quorum queue
        # electing its leader) raises here, and the call is sent again instead of waiting out its timeout.
        self._channel.confirm_delivery()
        # Direct reply-to: consume (no-ack) from the pseudo-queue before the first request.
        self._channel.basic_consume(bus.REPLY_TO, self._on_reply, auto_ack=True)

    def _publish_or_none(self, key: str, mtype: str, body: dict, timeout: float) -> str | None:
        """`_publish`, or None when the vhost has no gridbus exchanges yet (no agent ever started
        there): the broker closed the channel for it, a new one is opened, and nobody can answer."""
        try:
            return self._publish(key, mtype, body, timeout)
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code != 404:
                raise
            self._open_channel()
            return None

    def _fail_over(self) -> None:
        """The connection was lost: drop it and connect to the next broker that answers."""
        try:
            if self._connection is not None and self._connection.is_open:
                self._connection.close()
        except Exception:  # it is gone already
            pass
        self._connection = self._channel = None
        self._broker += 1
        self._connect()

    def _pump(self, seconds: float) -> None:
        """Let the connection deliver what came, waiting up to ``seconds`` (a call waits so)."""
        if self._connection is None:
            raise HTCondorConnectionError("the session is closed")
        self._connection.process_data_events(time_limit=seconds)

    def close(self) -> None:
        if self._connection is not None and self._connection.is_open:
            self._connection.close()
        self._connection = None

    delBroker = close

    def __enter__(self) -> Session:
        if self._connection is None:
            self.addBroker()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def user(self) -> str:
        assert self.url is not None
        return self.url.user

    # ------------------------------------------------------------------ requests
    def _on_reply(self, _ch: Any, _method: Any, props: Any, body: bytes) -> None:
        replies = self._pending.get(props.correlation_id or "")
        if replies is None:
            return  # late answer to a call that timed out
        reply = replies.setdefault(props.app_id or "?", Reply())
        reply.add(answer_of(body, props.content_type, props.headers, props.app_id or ""))

    def _publish(self, key: str, mtype: str, body: dict, timeout: float, content_type: str = wire.MSGPACK) -> str:
        if self._channel is None:
            self._connect() if self.url is not None else self.addBroker()
        cid = new_correlation_id()
        self._pending[cid] = {}
        props = pika.BasicProperties(
            content_type=content_type,
            type=mtype,
            correlation_id=cid,
            reply_to=bus.REPLY_TO,
            user_id=self.user,
            app_id=f"{self.name}@{_host()}",
            expiration=str(max(1, int(timeout * 1000))),
            headers=protocol.headers({"x-gridbus-timeout-ms": int(timeout * 1000)}),
        )
        try:
            self._channel.basic_publish(bus.RPC, key, wire.encode(body, content_type), props)
        except BaseException:
            self._pending.pop(cid, None)
            raise
        return cid

    def call(
        self,
        address: str,
        method: str,
        args: dict[str, Any] | None = None,
        *,
        obj: str | None = None,
        timeout: float | None = None,
    ) -> MethodResult:
        """Call ``method`` on object ``obj`` (default: the agent's own object) of the agent at ``address``.

        A call whose connection is lost before its answer is sent again once, through the next
        broker that answers. A request the agent may have served already is then served twice
        unless it is idempotent: Submit is (its SubmissionId), and so are the reads and the
        state changes that name their end state (Hold, Release, Remove of a job).
        """
        timeout = self.timeout if timeout is None else timeout
        return self._sent_again(lambda left: self._call(address, method, args, obj, left), timeout)

    def _sent_again(self, send: Any, timeout: float) -> Any:
        """``send(seconds left)``, sent again while the broker refuses the message (a nack: it took
        nothing, so sending again is safe; a quorum queue electing a new leader nacks for a while),
        and once more through the next broker if the connection is lost."""
        deadline = time.monotonic() + timeout
        failed_over = False
        left = timeout  # the first send has all of it (and names it in a timeout error)
        while True:
            try:
                return send(left)
            except pika.exceptions.NackError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)
            except _CONNECTION_LOST:
                if failed_over:
                    raise
                failed_over = True
                self._fail_over()
            left = max(0.001, deadline - time.monotonic())

    def _call(self, address: str, method: str, args: dict[str, Any] | None, obj: str | None,
              timeout: float) -> MethodResult:
        cid = self._publish_or_none(address, bus.T_METHOD_REQUEST, method_body(obj or address, method, args), timeout)
        if cid is None:
            raise CallTimeout(address, method, timeout)
        deadline = time.monotonic() + timeout
        try:
            while True:
                replies = self._pending[cid]
                done = [r for r in replies.values() if r.done]
                if done:
                    return done[0].result()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CallTimeout(address, method, timeout)
                self._pump(min(remaining, 1.0))
        finally:
            self._pending.pop(cid, None)

    def query(self, key: str, class_name: str | None, filters: dict | None, timeout: float | None = None) -> list[dict]:
        """Ask the agents reached by routing key ``key`` for their objects; gather every answer.

        Agents are not counted in advance (there is no registry to ask), so the answers are gathered
        until the stream has been quiet for a while: three times the first answer's delay, at
        least 50 ms, and never past the timeout.
        """
        timeout = self.timeout if timeout is None else timeout
        return self._sent_again(lambda left: self._query(key, class_name, filters, left), timeout)

    def _query(self, key: str, class_name: str | None, filters: dict | None, timeout: float) -> list[dict]:
        cid = self._publish_or_none(key, bus.T_QUERY_REQUEST, query_body(class_name, filters), timeout)
        if cid is None:
            return []
        start = time.monotonic()
        deadline = start + timeout
        first: float | None = None
        last_change = start
        seen = 0
        try:
            while True:
                now = time.monotonic()
                replies = self._pending[cid]
                finished = sum(r.done for r in replies.values())
                if finished != seen:
                    seen, last_change = finished, now
                    if first is None:
                        first = now - start
                if first is not None and now - last_change >= max(0.05, 3 * first):
                    break
                if now >= deadline:
                    break
                wait = min(deadline - now, 0.05 if first is not None else 0.5)
                self._pump(max(wait, 0.001))
            records: list[dict] = []
            for reply in replies.values():
                if reply.done and reply.status == 0:
                    records.extend(reply.out.get("objects", []))
            return records
        finally:
            self._pending.pop(cid, None)

    # ------------------------------------------------------------------ QMF console API
    def getObjects(
        self,
        _class: str | None = None,
        _package: str = "gridbus",
        _agent: str | Agent | None = None,
        _timeout: float | None = None,
        **selectors: Any,
    ) -> list[ObjectProxy]:
        """Objects of a class, from every agent serving it (or one agent), filtered by property equality."""
        if _package not in ("gridbus", "mrg.grid", "com.redhat.grid"):
            return []
        key = _agent.address if isinstance(_agent, Agent) else _agent
        if key is None:
            key = bus.class_key(_class) if _class else bus.BROADCAST_KEY
        timeout = 5.0 if _timeout is None else _timeout
        records = self.query(key, _class, selectors, timeout)
        return [ObjectProxy(self, r) for r in records]

    def getAgents(self, _timeout: float | None = None) -> list[Agent]:
        """Every agent on the broker that answers, with the classes it serves."""
        timeout = 5.0 if _timeout is None else _timeout
        agents: dict[str, Agent] = {}
        for record in self.query(bus.BROADCAST_KEY, None, {}, timeout):
            agent = agents.setdefault(record["agent"], Agent(self, record["agent"]))
            agent.classes.append(record["class"])
        return sorted(agents.values(), key=lambda a: a.address)


class Agent:
    """An agent as the console sees it: its address and the classes it serves."""

    def __init__(self, session: Session, address: str):
        self.session = session
        self.address = address
        self.classes: list[str] = []

    @property
    def kind(self) -> str:
        return self.address.split("@", 1)[0]

    @property
    def name(self) -> str:
        return self.address.split("@", 1)[1] if "@" in self.address else self.address

    def getObjects(self, _class: str | None = None, **selectors: Any) -> list[ObjectProxy]:
        return self.session.getObjects(_class=_class, _agent=self.address, **selectors)

    def __repr__(self) -> str:
        return f"Agent({self.address!r}, classes={self.classes})"


class ObjectProxy:
    """A managed object: properties and statistics read as attributes, methods are callables."""

    def __init__(self, session: Session, record: dict[str, Any]):
        self._session = session
        self._record = record

    @property
    def _agent(self) -> str:
        return self._record["agent"]

    def getClassKey(self) -> str:
        return self._record["class"]

    def getObjectId(self) -> str:
        return self._record["name"]

    def getProperties(self) -> list[tuple[str, Any]]:
        return list(self._record.get("properties", {}).items())

    def getStatistics(self) -> list[tuple[str, Any]]:
        return list(self._record.get("statistics", {}).items())

    def getMethods(self) -> list[str]:
        return list(self._record.get("methods", {}))

    def update(self) -> None:
        """Re-read the object's values from its agent."""
        props = self._record.get("properties", {})
        index = {k: props[k] for k in ("Name", "GlobalJobId") if k in props}
        fresh = self._session.query(self._agent, self.getClassKey(), index)
        for rec in fresh:
            if rec["name"] == self._record["name"]:
                self._record = rec

    def __getattr__(self, name: str) -> Any:
        record = self.__dict__.get("_record", {})
        for section in ("properties", "statistics"):
            if name in record.get(section, {}):
                return record[section][name]
        if name in record.get("methods", {}):
            return lambda *args, **kwargs: self._invoke(name, args, kwargs)
        raise AttributeError(f"{record.get('class', 'object')} {record.get('name', '?')!r} has no property or method {name!r}")

    def _invoke(self, method: str, args: tuple | list, kwargs: dict[str, Any]) -> MethodResult:
        timeout = kwargs.pop("_timeout", None)
        names = self._record["methods"][method]
        if len(args) > len(names):
            raise HTCondorTypeError(f"{method} takes at most {len(names)} positional arguments ({', '.join(names)}), got {len(args)}")
        call_args = dict(zip(names, args, strict=False))
        for k, v in kwargs.items():
            if k in call_args:
                raise HTCondorTypeError(f"{method} got argument {k!r} twice")
            call_args[k] = v
        return self._session.call(self._agent, method, call_args, obj=self._record["name"], timeout=timeout)

    def __repr__(self) -> str:
        return f"{self.getClassKey()}:{self.getObjectId()} at {self._agent}"


def _host() -> str:
    import socket

    return socket.gethostname()
