"""A local Fly Machines API for the tests: HTTP on 127.0.0.1 under /v1, machines kept in
memory per app, every request checked against the pinned Fly shapes (`shapes.py`; a request
Fly would not know is a violation and is answered 400), every request recorded.

    with fly_double(token="t", apps=("web",)) as fly:
        client = FlyMachinesClient("t", api_url=fly.api_url)
        ...
        assert fly.violations == []

A machine's state changes as Fly's do, a step behind the request: create answers `created`
and start answers before the machine runs; the next read or wait sees `started` (stop:
`stopped`). A wait for a state the machine is not headed for answers 408 at once (no test
sleeps). `fail_next` answers the next requests with an error (429 with Retry-After, 5xx).
It runs on its own thread and event loop, so synchronous and asynchronous tests can use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.support.fly.shapes import check_object, check_request, shapes

_ids = itertools.count(1)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Recorded:
    method: str
    path: str
    """Without the base path /v1."""
    query: dict[str, str]
    body: Any
    authorization: str
    operation: str | None
    status: int


@dataclass
class Fault:
    status: int
    times: int
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class MachineState:
    doc: dict[str, Any]
    pending: str | None = None
    """The state it reaches at the next read (Fly's machines change state after answering)."""

    def settle(self) -> dict[str, Any]:
        if self.pending is not None:
            self.doc["state"], self.pending = self.pending, None
            self.doc["updated_at"] = _now()
        return self.doc


class FlyDouble:
    def __init__(self, *, token: str, apps: tuple[str, ...] = ()) -> None:
        self.tokens = {token}
        self.apps: dict[str, dict[str, MachineState]] = {app: {} for app in apps}
        self.violations: list[str] = []
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            app = web.Application()
            app.router.add_route("*", "/v1/{tail:.*}", self._api)
            runner = web.AppRunner(app, access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = runner.addresses[0][1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fly-double", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the Fly double did not start")

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

    # -- what the tests set up and look at ------------------------------------------------

    def add_machine(self, app: str, *, state: str = "stopped", name: str = "") -> str:
        """A machine that exists already (made behind the operator's back)."""
        with self.lock:
            doc = self._new_machine(app, {"image": "registry.example/app:1"}, name, "")
            doc["state"] = state
            return str(doc["id"])

    def machine(self, app: str, machine_id: str) -> dict[str, Any]:
        with self.lock:
            return dict(self.apps[app][machine_id].doc)

    def fail_next(self, status: int, times: int = 1, headers: dict[str, str] | None = None) -> None:
        with self.lock:
            self.faults.append(Fault(status, times, dict(headers or {})))

    def calls(self, operation: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.operation == operation]

    # -- the API --------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
        query = dict(request.query)
        checked = check_request(request.method, path, query, body)
        authorization = request.headers.get("Authorization", "")
        status = 0
        try:
            with self.lock:
                self.violations.extend(checked.problems)
                if checked.problems:
                    status = 400
                    return _error(400, "; ".join(checked.problems))
                fault = next((f for f in self.faults if f.times > 0), None)
                if fault is not None:
                    fault.times -= 1
                    status = fault.status
                    return _error(fault.status, "injected", headers=fault.headers)
                scheme, _, value = authorization.partition(" ")
                if scheme not in ("Bearer", "FlyV1") or value not in self.tokens:
                    status = 401
                    return _error(401, "Authenticate: token validation error")
                answer = self._answer(checked.operation or "", checked.params, query, body)
                status = answer.status
                self._check_answer(checked.operation or "", answer)
                return answer
        finally:
            with self.lock:
                self.requests.append(
                    Recorded(
                        request.method,
                        path,
                        query,
                        body,
                        authorization,
                        checked.operation,
                        status,
                    )
                )

    def _check_answer(self, operation: str, answer: web.Response) -> None:
        spec = shapes()["operations"].get(operation)
        kind = spec["response"] if spec else None
        if kind is None or answer.status >= 400 or answer.text is None:
            return
        self.violations.extend(check_object(kind, json.loads(answer.text), f"{operation} answer"))

    def _answer(
        self, operation: str, params: dict[str, str], query: dict[str, str], body: Any
    ) -> web.Response:
        machines = self.apps.get(params.get("app_name", ""))
        if machines is None:
            return _error(404, "app not found")
        verb, template = operation.split(" ", 1)
        if template == "/apps/{app_name}/machines":
            if verb == "GET":
                docs = [m.settle() for m in machines.values() if m.doc["state"] != "destroyed"]
                return web.json_response(docs)
            config = (body or {}).get("config") or {}
            if not config.get("image"):
                return _error(422, "config.image is required")
            doc = self._new_machine(
                params["app_name"], config, body.get("name", ""), body.get("region", "")
            )
            if not body.get("skip_launch"):
                machines[doc["id"]].pending = "started"
            return web.json_response(doc)
        machine = machines.get(params["machine_id"])
        if machine is None or machine.doc["state"] == "destroyed":
            return _error(404, "machine not found")
        action = template.rsplit("/", 1)[1]
        if action == "{machine_id}":
            return web.json_response(machine.settle())
        if action == "start":
            previous = machine.settle()["state"]
            if previous != "started":
                machine.pending = "started"
            return web.json_response({}, status=200)
        if action == "stop":
            machine.settle()
            if machine.doc["state"] != "stopped":
                machine.pending = "stopped"
            return web.json_response({}, status=200)
        # wait
        wanted = query.get("state", "started")
        if machine.settle()["state"] == wanted:
            return web.json_response({"ok": True})
        return _error(408, f"deadline_exceeded: machine is {machine.doc['state']}, not {wanted}")

    def _new_machine(
        self, app: str, config: dict[str, Any], name: str, region: str
    ) -> dict[str, Any]:
        machine_id = f"{next(_ids):06x}{secrets.token_hex(4)}"
        now = _now()
        doc = {
            "id": machine_id,
            "name": name or f"machine-{machine_id[:6]}",
            "state": "created",
            "region": region or "ams",
            "instance_id": secrets.token_hex(8).upper(),
            "private_ip": "fdaa::1",
            "config": config,
            "image_ref": {"registry": "registry.example", "repository": "app", "tag": "1"},
            "created_at": now,
            "updated_at": now,
        }
        self.apps[app][machine_id] = MachineState(doc)
        return doc


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


@contextlib.contextmanager
def fly_double(**kwargs: Any) -> Iterator[FlyDouble]:
    double = FlyDouble(**kwargs)
    double.start()
    try:
        yield double
    finally:
        double.stop()
