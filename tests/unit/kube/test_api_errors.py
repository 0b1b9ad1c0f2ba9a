"""The API server's error answers become typed errors, chosen by the Status's code and
reason; structured fields (causes, retry-after) are parsed; every type is a KubeApiError."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from lattice_adapters.kube import (
    AlreadyExists,
    BadRequest,
    Cause,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    KubeApiError,
    KubeClient,
    KubeConfig,
    NotFound,
    PatchTestFailed,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    api_error,
    failed_tests,
)
from tests.support.local_http import serving


def status(code: int, reason: str, message: str = "m", **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        body["details"] = details
    return body


@pytest.mark.parametrize(
    ("code", "reason", "kind"),
    [
        (400, "BadRequest", BadRequest),
        (401, "Unauthorized", Unauthorized),
        (403, "Forbidden", Forbidden),
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", InternalError),
        (500, "ServerTimeout", ServerTimeout),
        (503, "ServiceUnavailable", ServiceUnavailable),
        (504, "Timeout", ServerTimeout),
        (418, "Teapot", KubeApiError),
    ],
)
def test_the_type_follows_code_and_reason(code: int, reason: str, kind: type) -> None:
    error = api_error(code, status(code, reason, "said"))
    assert type(error) is kind
    assert isinstance(error, KubeApiError)
    assert (error.status, error.reason, error.message) == (code, reason, "said")


def test_already_exists_is_a_conflict_and_the_old_flags_still_answer() -> None:
    exists = api_error(409, status(409, "AlreadyExists"))
    assert isinstance(exists, Conflict)
    assert exists.conflict
    assert not exists.not_found
    assert api_error(404, status(404, "NotFound")).not_found


def test_invalid_causes_are_parsed_and_bad_entries_skipped() -> None:
    error = api_error(
        422,
        status(
            422,
            "Invalid",
            causes=[
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.x"},
                "not an object",
                {"reason": "FieldValueInvalid"},
            ],
        ),
    )
    assert type(error) is Invalid
    assert error.causes == (
        Cause(field="spec.x", reason="FieldValueRequired", message="Required value"),
        Cause(field="", reason="FieldValueInvalid", message=""),
    )
    assert api_error(422, status(422, "Invalid", causes="nonsense")).causes == ()
    assert api_error(422, {"details": "nonsense"}).causes == ()


def test_the_words_of_a_patch_test_are_not_read() -> None:
    # Only the client, by reading the object again, decides a test failed (the API server
    # answers a failed test without saying so; see tests/e2e/test_cluster.py).
    worded = api_error(
        422,
        status(
            422,
            "Invalid",
            "testing value /metadata/generation failed",
            causes=[{"reason": "UnexpectedServerResponse", "message": "testing value x failed"}],
        ),
    )
    assert type(worded) is Invalid


def test_failed_tests_are_the_tests_that_do_not_hold() -> None:
    stored: dict[str, Any] = {"metadata": {"generation": 3, "a/b": [{"~x": 1}]}}
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/generation", "value": 3},
        {"op": "test", "path": "/metadata/a~1b/0/~0x", "value": 2},
        {"op": "test", "path": "/metadata/missing", "value": None},
        {"op": "test", "path": "/metadata/a~1b/9", "value": None},
        {"op": "add", "path": "/status", "value": {}},
    ]
    assert failed_tests(ops, stored) == [
        "/metadata/a~1b/0/~0x",
        "/metadata/missing",
        "/metadata/a~1b/9",
    ]
    assert failed_tests(ops[:1], stored) == []


def test_retry_after_comes_from_the_status_details() -> None:
    throttled = api_error(429, status(429, "TooManyRequests", retryAfterSeconds=3))
    assert isinstance(throttled, TooManyRequests)
    assert throttled.retry_after == 3.0
    bare = api_error(429, status(429, "TooManyRequests"))
    assert isinstance(bare, TooManyRequests)
    assert bare.retry_after is None


@pytest.fixture
async def answering_server() -> AsyncIterator[str]:
    """An API-server stand-in on 127.0.0.1: /status/<code>/<reason> answers that Status,
    /text/<code> a plain-text page with that code."""

    async def answer(request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        body = status(code, request.match_info["reason"], "as said", causes=[{"field": "f"}])
        return web.json_response(body, status=code)

    async def text(request: web.Request) -> web.Response:
        return web.Response(text="upstream broke", status=int(request.match_info["code"]))

    async def guarded(request: web.Request) -> web.Response:
        if request.method == "GET":
            return web.json_response({"metadata": {"generation": 2}})
        # As the real API server answers any JSON patch it cannot apply.
        body = status(422, "Invalid", "the server rejected our request")
        return web.json_response(body, status=422)

    app = web.Application()
    app.router.add_route("*", "/guarded", guarded)
    app.router.add_route("*", "/status/{code}/{reason}", answer)
    app.router.add_get("/text/{code}", text)
    async with serving(app) as url:
        yield url


async def test_the_client_raises_the_typed_errors(answering_server: str) -> None:
    async with KubeClient(KubeConfig(server=answering_server)) as kube:
        with pytest.raises(NotFound) as gone:
            await kube.get("/status/404/NotFound")
        assert gone.value.message == "as said"
        with pytest.raises(AlreadyExists):
            await kube.create("/status/409/AlreadyExists", {})
        with pytest.raises(Invalid) as invalid:
            await kube.merge_patch("/status/422/Invalid", {})
        assert invalid.value.causes == (Cause(field="f", reason="", message=""),)
        with pytest.raises(ServiceUnavailable) as page:
            await kube.get("/text/503")
        assert page.value.message == "upstream broke"


async def test_a_json_patch_whose_test_does_not_hold_raises_patch_test_failed(
    answering_server: str,
) -> None:
    test: dict[str, Any] = {"op": "test", "path": "/metadata/generation", "value": 1}
    add: dict[str, Any] = {"op": "add", "path": "/status", "value": {}}
    async with KubeClient(KubeConfig(server=answering_server)) as kube:
        with pytest.raises(PatchTestFailed) as failed:
            await kube.json_patch("/guarded", [test, add])
        assert failed.value.failed == ["/metadata/generation"]
        assert failed.value.status == 422
        # The test holds (or there is none): the patch failed otherwise, Invalid.
        for ops in ([{**test, "value": 2}, add], [add]):
            with pytest.raises(Invalid) as invalid:
                await kube.json_patch("/guarded", ops)
            assert type(invalid.value) is Invalid
