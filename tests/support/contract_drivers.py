"""The two clients the conformance suite drives with the same test functions.

`SdkDriver` uses only the official sprites-py SDK (its async client, and the sync client
where the async one has no call, e.g. kill). `AdapterDriver` uses our SpritesAdapter. Both
return plain values so one assertion serves both.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from dataclasses import dataclass, field
from typing import Protocol

import sprites
from sprites.session import kill_session as sdk_kill_session

from lattice_adapters.sprites import RetryPolicy, SpritesAdapter, SpritesCredentials
from lattice_operator.ports import errors


def http_status(error: BaseException) -> int | None:
    """The HTTP status an error carries (ours: `status`, the SDK's: `status_code`)."""
    status = getattr(error, "status", None) or getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


@dataclass
class RunResult:
    exit_code: int
    stdout: bytes
    stderr: bytes


@dataclass
class ExpectedErrors:
    """The exception each client raises for a kind of failure."""

    not_found: tuple[type[BaseException], ...]
    unauthorized: tuple[type[BaseException], ...]
    rate_limited: tuple[type[BaseException], ...]
    lost_socket: tuple[type[BaseException], ...]
    refused_path: tuple[type[BaseException], ...]
    too_large: tuple[type[BaseException], ...]
    stream_error: tuple[type[BaseException], ...]
    attach_missing: tuple[type[BaseException], ...]
    upgrade_refused: tuple[type[BaseException], ...]


@dataclass
class SpriteView:
    name: str
    status: str
    url_auth: str | None
    labels: list[str] = field(default_factory=list)


class Driver(Protocol):
    kind: str
    errors: ExpectedErrors

    async def create_sprite(
        self, name: str, *, url_auth: str = "sprite", labels: tuple[str, ...] = ()
    ) -> SpriteView: ...
    async def get_sprite(self, name: str) -> SpriteView: ...
    async def list_page(
        self, prefix: str, page_size: int, token: str | None
    ) -> tuple[list[str], str | None]: ...
    async def set_url_auth(self, name: str, auth: str) -> SpriteView: ...
    async def delete_sprite(self, name: str) -> None: ...
    async def run(
        self,
        name: str,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        tty: bool = False,
        rows: int = 24,
        cols: int = 80,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> RunResult: ...
    async def start_detached(self, name: str, argv: list[str]) -> str: ...
    async def attach_output(self, name: str, session_id: str) -> bytes: ...
    async def list_sessions(self, name: str) -> list[dict[str, object]]: ...
    async def kill(self, name: str, session_id: str) -> int | None: ...
    async def write(self, name: str, path: str, data: bytes) -> None: ...
    async def read(self, name: str, path: str, offset: int = 0) -> bytes: ...
    async def rename(self, name: str, source: str, dest: str) -> None: ...
    async def stat(self, name: str, path: str) -> tuple[int, bool]: ...
    async def checkpoint(self, name: str, comment: str) -> str: ...
    async def list_checkpoints(self, name: str) -> list[str]: ...
    async def restore(self, name: str, checkpoint_id: str) -> None: ...
    async def delete_checkpoint(self, name: str, checkpoint_id: str) -> None: ...
    async def aclose(self) -> None: ...


class AdapterDriver:
    kind = "adapter"
    errors = ExpectedErrors(
        not_found=(errors.NotFound,),
        unauthorized=(errors.Unauthorized,),
        rate_limited=(errors.RateLimited,),
        lost_socket=(errors.ExitStatusUnknown,),
        refused_path=(errors.InvalidRequest,),
        too_large=(errors.PayloadTooLarge,),
        stream_error=(errors.OperationFailed,),
        attach_missing=(errors.NotFound,),
        upgrade_refused=(errors.Unauthorized,),
    )

    def __init__(self, credentials: SpritesCredentials) -> None:
        # No retries: the suite checks what the server answers, retries are tested apart.
        self.adapter = SpritesAdapter(credentials, retry=RetryPolicy(max_attempts=1))

    async def aclose(self) -> None:
        await self.adapter.aclose()

    async def create_sprite(
        self, name: str, *, url_auth: str = "sprite", labels: tuple[str, ...] = ()
    ) -> SpriteView:
        info = await self.adapter.create_sprite(
            name,
            url_auth="public" if url_auth == "public" else "sprite",
            labels=labels,
        )
        return SpriteView(info.name, info.status, info.url_auth, list(info.labels))

    async def get_sprite(self, name: str) -> SpriteView:
        info = await self.adapter.get_sprite(name)
        return SpriteView(info.name, info.status, info.url_auth, list(info.labels))

    async def list_page(
        self, prefix: str, page_size: int, token: str | None
    ) -> tuple[list[str], str | None]:
        page = await self.adapter.list_sprites(
            prefix=prefix, page_size=page_size, continuation_token=token
        )
        return [s.name for s in page.sprites], page.next_token if page.has_more else None

    async def set_url_auth(self, name: str, auth: str) -> SpriteView:
        info = await self.adapter.update_sprite(
            name, url_auth="public" if auth == "public" else "sprite"
        )
        return SpriteView(info.name, info.status, info.url_auth, list(info.labels))

    async def delete_sprite(self, name: str) -> None:
        await self.adapter.delete_sprite(name)

    async def run(
        self,
        name: str,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        tty: bool = False,
        rows: int = 24,
        cols: int = 80,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> RunResult:
        session = await self.adapter.exec(
            name, argv, tty=tty, rows=rows, cols=cols, env=env, workdir=workdir
        )
        async with session:
            if stdin is not None:
                await session.write_stdin(stdin)
            if not tty:
                await session.close_stdin()
            out, err = bytearray(), bytearray()
            async for chunk in session:
                (out if chunk.stream == "stdout" else err).extend(chunk.data)
            assert session.exit_code is not None
            return RunResult(session.exit_code, bytes(out), bytes(err))

    async def start_detached(self, name: str, argv: list[str]) -> str:
        session = await self.adapter.exec(name, argv, max_run_after_disconnect=0)
        await session.detach()
        return session.session_id

    async def attach_output(self, name: str, session_id: str) -> bytes:
        out = bytearray()
        async with await self.adapter.attach(name, session_id) as session:
            async for chunk in session:
                out.extend(chunk.data)
        return bytes(out)

    async def list_sessions(self, name: str) -> list[dict[str, object]]:
        return [s.model_dump() for s in await self.adapter.list_sessions(name)]

    async def kill(self, name: str, session_id: str) -> int | None:
        result = await self.adapter.kill_session(name, session_id, grace=5)
        return result.exit_code

    async def write(self, name: str, path: str, data: bytes) -> None:
        await self.adapter.write_file(name, path, data)

    async def read(self, name: str, path: str, offset: int = 0) -> bytes:
        return await self.adapter.read_file(name, path, offset=offset)

    async def rename(self, name: str, source: str, dest: str) -> None:
        await self.adapter.rename(name, source, dest)

    async def stat(self, name: str, path: str) -> tuple[int, bool]:
        info = await self.adapter.stat(name, path)
        return info.size, info.is_dir

    async def checkpoint(self, name: str, comment: str) -> str:
        return (await self.adapter.create_checkpoint(name, comment)).id

    async def list_checkpoints(self, name: str) -> list[str]:
        return [c.id for c in await self.adapter.list_checkpoints(name)]

    async def restore(self, name: str, checkpoint_id: str) -> None:
        await self.adapter.restore_checkpoint(name, checkpoint_id)

    async def delete_checkpoint(self, name: str, checkpoint_id: str) -> None:
        await self.adapter.delete_checkpoint(name, checkpoint_id)


class SdkDriver:
    kind = "sdk"
    errors = ExpectedErrors(
        not_found=(sprites.NotFoundError, sprites.FileNotFoundError_),
        unauthorized=(sprites.AuthenticationError,),
        rate_limited=(sprites.SpriteError,),
        lost_socket=(sprites.NetworkError,),
        refused_path=(sprites.FilesystemError,),
        too_large=(sprites.FilesystemError,),
        stream_error=(),  # the SDK hands the error line back instead of raising
        attach_missing=(sprites.exceptions.APIError,),  # the upgrade's 404, parsed
        upgrade_refused=(sprites.exceptions.APIError,),
    )

    def __init__(self, credentials: SpritesCredentials) -> None:
        self._token = credentials.token.get_secret_value()
        self._base = credentials.api_url
        self.client = sprites.AsyncSpritesClient(self._token, base_url=self._base)

    async def aclose(self) -> None:
        await self.client.aclose()

    @staticmethod
    def _view(sprite: sprites.AsyncSprite) -> SpriteView:
        auth = sprite.url_settings.auth if sprite.url_settings else None
        return SpriteView(sprite.name, str(sprite.status), auth, list(sprite.labels))

    async def create_sprite(
        self, name: str, *, url_auth: str = "sprite", labels: tuple[str, ...] = ()
    ) -> SpriteView:
        sprite = await self.client.create_sprite(
            name, url_settings=sprites.URLSettings(auth=url_auth), labels=list(labels) or None
        )
        return self._view(sprite)

    async def get_sprite(self, name: str) -> SpriteView:
        return self._view(await self.client.get_sprite(name))

    async def list_page(
        self, prefix: str, page_size: int, token: str | None
    ) -> tuple[list[str], str | None]:
        page = await self.client.list_sprites(
            sprites.ListOptions(prefix=prefix, max_results=page_size, continuation_token=token)
        )
        return [
            s.name for s in page.sprites
        ], page.next_continuation_token if page.has_more else None

    async def set_url_auth(self, name: str, auth: str) -> SpriteView:
        return self._view(
            await self.client.update_sprite(name, url_settings=sprites.URLSettings(auth=auth))
        )

    async def delete_sprite(self, name: str) -> None:
        await self.client.destroy_sprite(name)

    async def run(
        self,
        name: str,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        tty: bool = False,
        rows: int = 24,
        cols: int = 80,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> RunResult:
        out, err = io.BytesIO(), io.BytesIO()
        cmd = self.client.sprite(name).command(
            *argv,
            env=env,
            cwd=workdir,
            stdin=io.BytesIO(stdin) if stdin is not None else None,
            stdout=out,
            stderr=err,
            tty=tty,
            tty_rows=rows,
            tty_cols=cols,
        )
        try:
            await cmd.run()
            code = 0
        except sprites.ExecError as exc:
            code = exc.exit_code()
        return RunResult(code, out.getvalue(), err.getvalue())

    async def start_detached(self, name: str, argv: list[str]) -> str:
        # The SDK cannot detach: a timeout closes its socket, and the session lives on for
        # the server's default max_run_after_disconnect (10 s without a TTY).
        before = {str(s["id"]) for s in await self.list_sessions(name)}
        cmd = self.client.sprite(name).command(*argv, timeout=0.5)
        with contextlib.suppress(sprites.exceptions.TimeoutError):
            await cmd.run()
        after = [s for s in await self.list_sessions(name) if str(s["id"]) not in before]
        assert len(after) == 1, after
        return str(after[0]["id"])

    async def attach_output(self, name: str, session_id: str) -> bytes:
        return await self.client.sprite(name).attach_session(session_id).output()

    async def list_sessions(self, name: str) -> list[dict[str, object]]:
        return [
            {"id": str(s.id), "command": s.command, "tty": s.tty, "workdir": s.workdir}
            for s in await self.client.sprite(name).list_sessions()
        ]

    async def kill(self, name: str, session_id: str) -> int | None:
        def kill() -> None:
            with sprites.SpritesClient(self._token, base_url=self._base) as client:
                stream = sdk_kill_session(client.sprite(name), session_id)
                list(stream)

        await asyncio.to_thread(kill)
        return None  # the SDK's kill stream has no exit code field

    async def write(self, name: str, path: str, data: bytes) -> None:
        await (self.client.sprite(name).filesystem("/") / path).write_bytes(data)

    async def read(self, name: str, path: str, offset: int = 0) -> bytes:
        if offset == 0:
            return await (self.client.sprite(name).filesystem("/") / path).read_bytes()
        # No offset read in the SDK: a Range request through its authenticated client.
        response = await self.client.http_client.get(
            f"{self._base}/v1/sprites/{name}/fs/read",
            params={"path": path, "workingDir": "/"},
            headers={"Range": f"bytes={offset}-"},
        )
        if response.status_code == 416:
            return b""
        assert response.status_code == 206, response.status_code
        return response.content

    async def rename(self, name: str, source: str, dest: str) -> None:
        await (self.client.sprite(name).filesystem("/") / source).rename(dest)

    async def stat(self, name: str, path: str) -> tuple[int, bool]:
        info = await (self.client.sprite(name).filesystem("/") / path).stat()
        return info.size, info.is_dir

    async def checkpoint(self, name: str, comment: str) -> str:
        stream = await self.client.sprite(name).create_checkpoint(comment)
        messages = list(stream)
        complete = [m for m in messages if m.type == "complete"]
        assert complete, messages
        return str(complete[0].data).split()[1]

    async def list_checkpoints(self, name: str) -> list[str]:
        return [c.id for c in await self.client.sprite(name).list_checkpoints()]

    async def restore(self, name: str, checkpoint_id: str) -> None:
        stream = await self.client.sprite(name).restore_checkpoint(checkpoint_id)
        messages = list(stream)
        assert [m.type for m in messages][-1] == "complete", messages

    async def delete_checkpoint(self, name: str, checkpoint_id: str) -> None:
        # The SDK has no delete: the REST form through its authenticated client.
        response = await self.client.http_client.delete(
            f"{self._base}/v1/sprites/{name}/checkpoints/{checkpoint_id}"
        )
        if response.status_code == 404:
            raise sprites.NotFoundError(response.text)
        assert response.status_code == 204, (response.status_code, response.text)
