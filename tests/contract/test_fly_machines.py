"""The Fly port's adapter against the local Fly Machines API (tests/support/fly/), whose
requests and answers are checked against the Fly shapes pinned in
tests/data/fly/machines-api.json (taken from Fly's published API description and from
fly-go; the file says where): auth header, errors mapped to the port's tree, retries
bounded, a create never repeated when it may have happened; and what the fly_machines
handler does with it (idempotent create, start and stop with a wait)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from lattice_adapters.fly import FlyMachinesClient, auth_header
from lattice_operator.api.v1alpha1 import Intent
from lattice_operator.handlers.intent_fly import INTENT_UID_KEY, carry_out
from lattice_operator.ports.errors import (
    Conflict,
    NotFound,
    RateLimited,
    Timeout,
    TransportError,
    Unauthorized,
)
from lattice_operator.ports.fly import FlyGuest, FlyMachine, FlyMachineConfig
from lattice_operator.reconcilers.intent_kinds.fly import machine_name
from lattice_operator.reconcilers.intent_pass import FlyWork
from tests.support.admission_cases import sample
from tests.support.fly.server import FlyDouble, fly_double
from tests.support.fly.shapes import check_object, check_request, shapes

pytestmark = pytest.mark.contract

TOKEN = "fly-test-token"
APP = "web"
CREATE = "POST /apps/{app_name}/machines"
GET = "GET /apps/{app_name}/machines/{machine_id}"
START = "POST /apps/{app_name}/machines/{machine_id}/start"
STOP = "POST /apps/{app_name}/machines/{machine_id}/stop"
WAIT = "GET /apps/{app_name}/machines/{machine_id}/wait"
CONFIG = FlyMachineConfig(image="registry.example/app:2", env={"MODE": "preview"}, guest=FlyGuest())


@pytest.fixture
def fly() -> Iterator[FlyDouble]:
    with fly_double(token=TOKEN, apps=(APP,)) as double:
        yield double
        assert double.violations == [], double.violations  # nothing Fly would not know


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def client(fly: FlyDouble, sleeps: Sleeps) -> AsyncIterator[FlyMachinesClient]:
    async with FlyMachinesClient(
        TOKEN, api_url=fly.api_url, max_attempts=3, backoff=0.25, sleep=sleeps
    ) as c:
        yield c


# -- the pinned shapes -------------------------------------------------------------------


def test_the_pinned_shapes_name_their_sources_and_the_port_stays_inside_them() -> None:
    data = shapes()
    assert {s["repository"] for s in data["sources"]} == {
        "superfly/fly-openapi-sdk",
        "superfly/fly-go",
    }
    assert all(len(s["commit"]) == 40 for s in data["sources"])
    schemas = data["schemas"]
    for model, schema in (
        (FlyMachine, "Machine"),
        (FlyMachineConfig, "MachineConfig"),
        (FlyGuest, "MachineGuest"),
    ):
        assert set(model.model_fields) <= set(schemas[schema]), (model, schema)


def test_the_shape_check_bites() -> None:
    """A request Fly would not know is reported: a path, a method, a query, a field."""
    assert check_request("GET", "/apps/web/volumes", {}, None).problems
    assert check_request("DELETE", "/apps/web/machines/abc/start", {}, None).problems
    assert check_request("GET", "/apps/web/machines/abc/wait", {"state": "asleep"}, None).problems
    body = {"config": {"image": "x", "imagePullPolicy": "always"}}
    assert check_request("POST", "/apps/web/machines", {}, body).problems
    assert check_object("MachineGuest", {"cpus": "two"}, "guest")
    assert not check_request("GET", "/apps/web/machines/abc", {}, None).problems


# -- the adapter -------------------------------------------------------------------------


async def test_create_wait_stop_and_read_back(client: FlyMachinesClient, fly: FlyDouble) -> None:
    made = await client.create_machine(APP, CONFIG, name="preview", region="ams")
    assert (made.name, made.state) == ("preview", "created")
    await client.wait_for_state(APP, made.id, "started", timeout_seconds=5)
    assert (await client.get_machine(APP, made.id)).state == "started"
    await client.stop_machine(APP, made.id, kill_after="10s")
    await client.wait_for_state(APP, made.id, "stopped", timeout_seconds=5)
    [listed] = await client.list_machines(APP)
    assert listed.state == "stopped"
    assert listed.config is not None
    assert listed.config.env == {"MODE": "preview"}
    [create] = fly.calls(CREATE)
    assert create.authorization == f"Bearer {TOKEN}"
    assert create.body["config"]["image"] == "registry.example/app:2"
    [stop] = fly.calls(STOP)
    assert stop.body == {"timeout": "10s"}
    assert [w.query for w in fly.calls(WAIT)] == [
        {"state": "started", "timeout": "5"},
        {"state": "stopped", "timeout": "5"},
    ]


def test_a_token_that_names_its_scheme_is_sent_as_given() -> None:
    assert auth_header("abc") == "Bearer abc"
    assert auth_header("FlyV1 fm2_abc,fm2_def") == "FlyV1 fm2_abc,fm2_def"
    assert auth_header("Bearer abc\n") == "Bearer abc"


async def test_errors_map_to_the_ports_tree(fly: FlyDouble, sleeps: Sleeps) -> None:
    async with FlyMachinesClient("wrong", api_url=fly.api_url, sleep=sleeps) as bad:
        with pytest.raises(Unauthorized) as denied:
            await bad.list_machines(APP)
    assert denied.value.status == 401
    async with FlyMachinesClient(TOKEN, api_url=fly.api_url, sleep=sleeps) as good:
        with pytest.raises(NotFound):
            await good.list_machines("no-such-app")
        with pytest.raises(NotFound):
            await good.get_machine(APP, "0000000000")
        stopped = fly.add_machine(APP, state="stopped")
        with pytest.raises(Timeout) as late:  # a wait whose state is not coming: 408
            await good.wait_for_state(APP, stopped, "started", timeout_seconds=1)
        assert late.value.status == 408
    assert sleeps.calls == []  # none of these is retried


async def test_retries_are_bounded_and_back_off(
    client: FlyMachinesClient, fly: FlyDouble, sleeps: Sleeps
) -> None:
    machine = fly.add_machine(APP, state="stopped")
    fly.fail_next(503, times=2)
    await client.start_machine(APP, machine)  # the third try goes through
    assert [r.status for r in fly.calls(START)] == [503, 503, 200]
    assert sleeps.calls == [0.25, 0.5]

    fly.fail_next(502, times=10)
    with pytest.raises(TransportError) as failed:
        await client.get_machine(APP, machine)
    assert failed.value.status == 502
    assert len(fly.calls(GET)) == 3  # max_attempts, not more

    sleeps.calls.clear()
    fly.faults.clear()
    fly.fail_next(429, times=1, headers={"Retry-After": "2"})
    await client.get_machine(APP, machine)
    assert sleeps.calls == [2.0]  # Fly's Retry-After, not the backoff


async def test_a_create_that_may_have_happened_is_not_repeated(
    client: FlyMachinesClient, fly: FlyDouble
) -> None:
    fly.fail_next(503, times=1)
    with pytest.raises(TransportError):
        await client.create_machine(APP, CONFIG, name="once")
    assert len(fly.calls(CREATE)) == 1
    fly.fail_next(429, times=1)  # refused, so not made: retried
    made = await client.create_machine(APP, CONFIG, name="once")
    assert [r.status for r in fly.calls(CREATE)] == [503, 429, 200]
    assert made.name == "once"


async def test_a_rate_limit_that_never_ends_is_rate_limited(
    client: FlyMachinesClient, fly: FlyDouble
) -> None:
    fly.fail_next(429, times=10)
    with pytest.raises(RateLimited):
        await client.list_machines(APP)
    assert len(fly.requests) == 3


# -- the fly_machines handler's action ---------------------------------------------------


def fly_intent(name: str, uid: str, **params: object) -> Intent:
    doc = sample("intent-fly-machines.yaml")
    doc["metadata"] = {"name": name, "namespace": "ns", "uid": uid, "generation": 1}
    doc["spec"]["params"]["flyMachines"] = {"app": APP, **params}
    return Intent.model_validate(doc)


def work_for(it: Intent) -> FlyWork:
    params = it.spec.params.fly_machines
    assert params is not None
    return FlyWork(params=params, attempt=1, machine_name=machine_name(it, params))


async def test_create_is_idempotent_and_never_takes_another_intents_machine(
    client: FlyMachinesClient, fly: FlyDouble
) -> None:
    machine = {"image": "registry.example/app:2", "guest": {"cpus": 2, "memoryMb": 512}}
    it = fly_intent("deploy", "uid-1", action="create", machine=machine, waitSeconds=10)
    first = await carry_out(client, it, work_for(it))
    assert (first.name, first.state) == ("deploy", "started")
    again = await carry_out(client, it, work_for(it))  # a pass repeated after a crash
    assert again.id == first.id
    assert len(fly.calls(CREATE)) == 1
    stored = fly.machine(APP, first.id)
    assert stored["config"]["metadata"] == {INTENT_UID_KEY: "uid-1"}
    assert stored["config"]["guest"] == {"cpu_kind": "shared", "cpus": 2, "memory_mb": 512}

    other = fly_intent("deploy", "uid-2", action="create", machine=machine)
    with pytest.raises(Conflict):
        await carry_out(client, other, work_for(other))
    assert len(fly.calls(CREATE)) == 1


async def test_start_and_stop_wait_for_the_state_and_skip_what_is_done(
    client: FlyMachinesClient, fly: FlyDouble
) -> None:
    machine = fly.add_machine(APP, state="stopped")
    start = fly_intent("up", "u", action="start", machineId=machine, waitSeconds=5)
    assert (await carry_out(client, start, work_for(start))).state == "started"
    assert (await carry_out(client, start, work_for(start))).state == "started"
    assert len(fly.calls(START)) == 1  # already started the second time: not asked again
    stop = fly_intent("down", "u", action="stop", machineId=machine, waitSeconds=0)
    stopped = await carry_out(client, stop, work_for(stop))
    assert stopped.state == "started"  # not waited for: as Fly answered
    assert fly.machine(APP, machine)["state"] in ("started", "stopped")
    assert (await client.get_machine(APP, machine)).state == "stopped"
    assert fly.calls(WAIT)[-1].query == {"state": "started", "timeout": "5"}
