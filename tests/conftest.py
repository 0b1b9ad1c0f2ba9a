"""Test-suite wide hygiene and the cluster fixtures."""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import file_costs, operator_slot
from tests.support.cluster import Cluster, cluster_session
from tests.support.sprites_server import LocalSprites, sprites_server

# Property tests assert what holds, never how fast: hypothesis's per-example deadline (200 ms)
# and its too-slow health check are timings, and fail by chance on a loaded machine (a ring
# buffer's property test did under `make soak`-like load). A test may still set its own.
settings.register_profile("lattice", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lattice")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--timeline",
        type=Path,
        default=None,
        help="append one JSON line per test (file, worker, start, end) to this file",
    )


def pytest_configure(config: pytest.Config) -> None:
    timeline = config.getoption("timeline", None)
    # xdist's controller is handed every worker's test reports: only the runners record.
    controller = bool(getattr(config.option, "numprocesses", None)) and not os.environ.get(
        "PYTEST_XDIST_WORKER"
    )
    if timeline is not None and not controller:
        config.pluginmanager.register(file_costs.Timeline(timeline, file_costs.ROOT), "timeline")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    shared = {str(item.path) for item in items if operator_slot.uses_shared_operator(item)}
    operator_slot.note_shared_files(shared)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The workers' collection is the order xdist hands files out in (make test passes
        # --no-loadscope-reorder): longest first, so both workers end together, with the
        # files sharing the operator together so it starts few times.
        together = {file_costs.relative(Path(path), file_costs.ROOT) for path in shared}
        file_costs.order_items(items, file_costs.ROOT, file_costs.load_costs(), together)
    # Every coroutine test gets the leak check, set up first so it is torn down last.
    for item in items:
        fn = getattr(item, "function", None)
        if fn is not None and inspect.iscoroutinefunction(fn) and isinstance(item, pytest.Function):
            item.fixturenames.insert(0, "no_leaked_tasks")
        if "tests/bench/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.bench)


@pytest.fixture(scope="module", autouse=True)
def _one_operator_at_a_time(request: pytest.FixtureRequest) -> None:
    """A module that does not share the worker's operator runs without it: it may start its
    own, or write objects no operator is to act on (tests/support/operator_slot.py)."""
    if not operator_slot.is_shared_file(request.path):
        operator_slot.release_shared()


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running behind it."""
    yield
    current = asyncio.current_task()
    for _ in range(3):  # let tasks cancelled during teardown finish
        await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    for task in leaked:
        task.cancel()
    if leaked:
        pytest.fail(f"leaked asyncio tasks: {[t.get_name() for t in leaked]!r}")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A Kubernetes cluster: $KUBECONFIG if set (kind users), else the local control plane."""
    with cluster_session(tmp_path_factory.mktemp("cluster")) as c:
        yield c


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, deleted afterwards."""
    name = cluster.create_namespace(request.node.name)
    yield name
    cluster.delete_namespace(name)


@pytest.fixture(scope="session")
def local_sprites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSprites]:
    """One local Sprites server for the session (real processes in private namespaces)."""
    with sprites_server(tmp_path_factory.mktemp("sprites"), warm_after=5.0, cold_after=3600) as s:
        yield s
