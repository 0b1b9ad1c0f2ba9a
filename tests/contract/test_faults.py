"""Each fault switch of the local server, and the error class each client reports for it.

Local only: the real service has no switches (so no `real` variant is generated here).
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import sprites

from lattice_adapters.sprites import RetryPolicy, SpritesAdapter, WsExecSession
from lattice_operator.ports import errors
from tests.support.contract_drivers import AdapterDriver, Driver
from tests.support.contract_target import Target, local_target
from tests.support.sprites_server import LocalSprites

pytestmark = pytest.mark.contract


@pytest.fixture
def target(local_sprites: LocalSprites) -> Target:
    return local_target(local_sprites)


async def test_drop_before_exit_is_an_unknown_outcome(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    local_sprites.set_faults(drop_before_exit=True, sprites=[sprite])
    with pytest.raises(driver.errors.lost_socket):
        await driver.run(sprite, ["sh", "-c", "touch /workspace/ran; exit 0"])
    local_sprites.reset_faults()
    # The command did run: an unknown outcome is not a failure either.
    assert (local_sprites.host_root(sprite) / "ran").exists()


async def test_close_without_close_frame_after_exit_is_still_success(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    local_sprites.set_faults(close_without_close_frame=True, sprites=[sprite])
    result = await driver.run(sprite, ["sh", "-c", "echo fine; exit 7"])
    assert result.exit_code == 7
    assert result.stdout == b"fine\n"


async def test_delayed_close_does_not_delay_the_result(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    local_sprites.set_faults(close_delay=6.0, sprites=[sprite])
    started = time.monotonic()
    result = await driver.run(sprite, ["echo", "quick"])
    assert result.exit_code == 0
    # The client closes on the exit frame instead of waiting for the server's close.
    assert time.monotonic() - started < 4.0


async def test_rate_limit_carries_retry_after(
    driver: Driver, target: Target, local_sprites: LocalSprites
) -> None:
    local_sprites.set_faults(
        rate_limit={
            "remaining": 1,
            "retry_after": 3,
            "method": "POST",
            "path_prefix": "/v1/sprites",
        }
    )
    with pytest.raises(driver.errors.rate_limited) as caught:
        await driver.create_sprite("ct-limited")
    if isinstance(caught.value, errors.RateLimited):
        assert caught.value.retry_after == 3
        assert caught.value.status == 429
    else:  # the SDK keeps only the status and body text on REST calls
        assert "429" in str(caught.value)
    # The switch counts down: the next create goes through.
    await driver.create_sprite("ct-limited")
    await driver.delete_sprite("ct-limited")


async def test_rate_limited_exec_upgrade(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    local_sprites.set_faults(
        rate_limit={"remaining": 1, "retry_after": 2, "path_prefix": f"/v1/sprites/{sprite}/exec"}
    )
    if driver.kind == "adapter":
        with pytest.raises(errors.RateLimited) as caught:
            await driver.adapter.exec(sprite, ["true"])  # type: ignore[attr-defined]
        assert caught.value.retry_after == 2
    else:
        with pytest.raises(sprites.exceptions.APIError) as sdk_caught:
            await driver.run(sprite, ["true"])
        assert sdk_caught.value.status_code == 429
        assert sdk_caught.value.get_retry_after_seconds() == 2


async def test_adapter_retries_a_429_after_retry_after(
    target: Target, local_sprites: LocalSprites
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    local_sprites.set_faults(rate_limit={"remaining": 2, "retry_after": 4, "method": "POST"})
    async with SpritesAdapter(
        target.credentials, sleep=sleep, rng=random.Random(7), retry=RetryPolicy(deadline=60)
    ) as adapter:
        info = await adapter.create_sprite("ct-retried")
        assert info.name == "ct-retried"
        await adapter.delete_sprite("ct-retried")
    assert len(waits) == 2
    assert all(4.0 <= w <= 4.0 + RetryPolicy().base_delay for w in waits)


async def test_cold_mid_session_loses_the_session(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    async def go_cold_soon() -> None:
        await asyncio.sleep(0.5)
        await asyncio.to_thread(local_sprites.go_cold, sprite)

    cold = asyncio.create_task(go_cold_soon())
    try:
        with pytest.raises(driver.errors.lost_socket):
            await driver.run(sprite, ["sleep", "30"])
    finally:
        await cold
    assert (await driver.get_sprite(sprite)).status == "cold"
    assert local_sprites.describe(sprite)["sessions"] == []


async def test_slow_wake(driver: Driver, sprite: str, local_sprites: LocalSprites) -> None:
    local_sprites.set_faults(slow_wake=1.0, sprites=[sprite])
    assert (await driver.get_sprite(sprite)).status == "cold"
    started = time.monotonic()
    result = await driver.run(sprite, ["true"])
    assert result.exit_code == 0
    assert time.monotonic() - started >= 1.0
    assert (await driver.get_sprite(sprite)).status == "running"


async def test_error_line_inside_a_200_checkpoint_stream(
    driver: Driver, sprite: str, local_sprites: LocalSprites
) -> None:
    local_sprites.set_faults(stream_error=1, sprites=[sprite])
    if isinstance(driver, AdapterDriver):
        with pytest.raises(errors.OperationFailed, match="injected fault"):
            await driver.adapter.create_checkpoint(sprite, "doomed")
    else:
        stream = await driver.client.sprite(sprite).create_checkpoint("doomed")  # type: ignore[attr-defined]
        kinds = [m.type for m in stream]
        # The SDK hands the error line back inside a "successful" stream.
        assert "error" in kinds
        assert "complete" not in kinds


async def test_restore_error_line_is_raised(
    target: Target, sprite: str, local_sprites: LocalSprites
) -> None:
    async with SpritesAdapter(target.credentials) as adapter:
        checkpoint = await adapter.create_checkpoint(sprite, "base")
        local_sprites.set_faults(stream_error=1, sprites=[sprite])
        with pytest.raises(errors.OperationFailed):
            await adapter.restore_checkpoint(sprite, checkpoint.id)


async def test_dropped_socket_then_reattach_while_process_runs(
    target: Target, sprite: str, local_sprites: LocalSprites
) -> None:
    expected = b"".join(f"line-{i}\n".encode() for i in range(300))
    script = "i=0; while [ $i -lt 300 ]; do echo line-$i; i=$((i+1)); sleep 0.01; done"
    async with SpritesAdapter(target.credentials) as adapter:
        session = await adapter.exec(sprite, ["sh", "-c", script], max_run_after_disconnect=0)
        seen = b""
        for drop in range(5):
            while seen.count(b"\n") < 20 * (drop + 1):
                seen += (await session.__anext__()).data
            dropped = await asyncio.to_thread(
                local_sprites.drop_sockets, sprite, session.session_id
            )
            assert dropped == 1
            received = bytearray(seen)
            with pytest.raises(errors.ExitStatusUnknown):
                await _collect(session, received)
            seen = bytes(received)
            assert expected.startswith(seen)
            session = await adapter.attach(sprite, session.session_id)
            replay = b""
            async for chunk in session:
                if chunk.replay:
                    replay += chunk.data
                    continue
                # Everything printed so far is replayed (the scrollback holds it all):
                # nothing was lost while no socket was attached.
                assert replay.startswith(seen)
                seen = replay + chunk.data
                break
        async for chunk in session:
            assert not chunk.replay
            seen += chunk.data
        assert session.exit_code == 0
        assert seen == expected


async def _collect(session: WsExecSession, into: bytearray) -> None:
    async for chunk in session:
        into += chunk.data


async def test_atomic_write_goes_through_a_temporary_file(
    target: Target, local_sprites: LocalSprites
) -> None:
    async with SpritesAdapter(target.credentials, retry=RetryPolicy(deadline=5)) as adapter:
        await adapter.create_sprite("ct-atomic")
        try:
            await adapter.write_file("ct-atomic", "/workspace/state.json", b'{"v": 1}')
            root = local_sprites.host_root("ct-atomic")
            # The rename is refused (Retry-After beyond the deadline): the target keeps its
            # old content, and the temporary file the write went to is removed again.
            local_sprites.set_faults(
                rate_limit={
                    "remaining": 10,
                    "retry_after": 600,
                    "method": "POST",
                    "path_prefix": "/v1/sprites/ct-atomic/fs/rename",
                }
            )
            with pytest.raises(errors.RateLimited):
                await adapter.write_file("ct-atomic", "/workspace/state.json", b'{"v": 2}')
            local_sprites.reset_faults()
            assert (root / "state.json").read_bytes() == b'{"v": 1}'
            assert sorted(p.name for p in root.iterdir() if "tmp" in p.name) == []
            # Without the fault the new content lands, and nothing is left behind.
            await adapter.write_file("ct-atomic", "/workspace/state.json", b'{"v": 3}')
            assert (root / "state.json").read_bytes() == b'{"v": 3}'
            assert sorted(p.name for p in root.iterdir() if "tmp" in p.name) == []
        finally:
            local_sprites.reset_faults()
            await adapter.delete_sprite("ct-atomic")
