"""The console's JSON side as another program would use it: nothing without a sign-in, the
broker's refusal of a wrong password, and the schedd's rules for who may act on a job (its owner,
an administrator on any), seen through the console."""

from __future__ import annotations

import http.cookiejar
import json
import urllib.error
import urllib.request

import pytest

from gridbus.console.schedd import JobAction, Schedd
from gridbus.submit import Submit
from tests.e2e.web.conftest import WebPool

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


class Client:
    def __init__(self, url: str):
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def call(self, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data, {"Content-Type": "application/json"})
        try:
            with self.opener.open(request, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


def listed(client: Client, path: str) -> list[str]:
    """The job ids a queue view lists."""
    return [f"{j['ClusterId']}.{j['ProcId']}" for s in client.call(path)[1]["schedds"] for j in s["jobs"]]


def test_sign_in_and_the_schedds_rules(web_pool: WebPool):
    alice, alice_password = web_pool.users["alice"]
    nobody = Client(web_pool.url)
    assert nobody.call("/api/queue")[0] == 401
    status, out = nobody.call("/api/login", {"user": alice, "password": alice_password + "x"})
    assert status == 403 and "refused" in out["error"]
    assert nobody.call("/api/login", {"user": "", "password": ""})[0] == 403
    # A form another site's page could post (no JSON content type) is refused, whatever it holds.
    form = urllib.request.Request(f"{web_pool.url}/api/login", json.dumps({"user": alice, "password": alice_password}).encode(),
                                  {"Content-Type": "text/plain"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(form, timeout=30)
    assert refused.value.code == 415

    with Schedd(url=web_pool.user_url("bob")) as schedd:
        bobs = f"{schedd.submit(Submit({'executable': '/bin/sleep', 'arguments': '60', 'hold': 'true'})).cluster()}.0"
    try:
        as_alice = Client(web_pool.url)
        assert as_alice.call("/api/login", {"user": alice, "password": alice_password})[0] == 200
        # Her queue (condor_q's default: her own jobs) has none of bob's; every user's has his.
        assert bobs not in listed(as_alice, "/api/queue") and bobs in listed(as_alice, "/api/queue?all=1")
        status, out = as_alice.call("/api/job/action", {"action": "release", "id": bobs})
        assert status == 403 and "may not release" in out["error"], out
        assert as_alice.call("/api/job/action", {"action": "explode", "id": bobs})[0] == 400
        assert as_alice.call("/api/job/action", {"action": "hold", "id": "not-a-job"})[0] == 400

        # The pool's administrator (the daemons' account here) acts on anyone's job.
        admin = Client(web_pool.url)
        assert admin.call("/api/login", {"user": web_pool.broker.user, "password": web_pool.broker.password})[0] == 200
        status, out = admin.call("/api/job/action", {"action": "remove", "id": bobs})
        assert status == 200 and out["totals"]["TotalSuccess"] == 1, out
        assert admin.call("/api/logout", {})[0] == 200
        assert admin.call("/api/queue")[0] == 401
    finally:  # the package's pool is left without the job, whatever failed above
        with Schedd(url=web_pool.user_url("bob")) as schedd:
            if schedd.query(f"ClusterId == {bobs.split('.')[0]} && JobStatus != 3", ["JobStatus"]):
                schedd.act(JobAction.Remove, bobs)
