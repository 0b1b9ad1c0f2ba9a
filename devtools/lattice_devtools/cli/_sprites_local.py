"""`lattice sprites-local`: the local Sprites-compatible server (the default dev/test backend)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer


def sprites_local(
    token: Annotated[
        str,
        typer.Option(
            envvar="SPRITES_LOCAL_TOKEN",
            help="Bearer token every request must carry (or $SPRITES_LOCAL_TOKEN).",
            show_default=False,
        ),
    ],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on; 0 picks a free one.")] = 8480,
    state_dir: Annotated[
        Path, typer.Option(help="Where sprites live (one directory each, kept across restarts).")
    ] = Path(".lattice/sprites-local"),
    warm_after: Annotated[
        float, typer.Option(help="Idle seconds before a running sprite turns warm.")
    ] = 30.0,
    cold_after: Annotated[
        float, typer.Option(help="Idle seconds before a sprite turns cold (processes killed).")
    ] = 600.0,
    scrollback: Annotated[
        int, typer.Option(help="Bytes of output kept per session for replay on attach.")
    ] = 64 * 1024,
    organization: Annotated[str, typer.Option(help="Organisation name reported.")] = "local",
    ready_file: Annotated[
        Path | None, typer.Option(help="Write {url, port, pid} as JSON here once serving.")
    ] = None,
    isolation: Annotated[
        str,
        typer.Option(
            help="container: each sprite a runc container on a Debian root of its own (see "
            "--rootfs) with its own PID, IPC, UTS, network and mount namespaces, a user of its "
            "own and control groups with the limits below; its network policy is enforced by "
            "an egress proxy, its only way out. sandbox: the same user, /proc, /tmp, network "
            "and limits, but the host's filesystem as root. none: not isolated (root, the "
            "whole host, its network)."
        ),
    ] = "container",
    rootfs: Annotated[
        Path | None,
        typer.Option(
            help="The sprites' root filesystem (container isolation); default: the one "
            "`make sprite-rootfs` built, or $LATTICE_SPRITE_ROOTFS."
        ),
    ] = None,
    runc: Annotated[str, typer.Option(help="The runc binary (container isolation).")] = "runc",
    sprite_cpus: Annotated[float, typer.Option(help="CPUs each sprite may use.")] = 1.0,
    sprite_memory: Annotated[int, typer.Option(help="MiB of memory each sprite may use.")] = 1024,
    sprite_pids: Annotated[int, typer.Option(help="Processes each sprite may have.")] = 512,
    egress_allow_private: Annotated[
        list[str] | None,
        typer.Option(
            help="An address or CIDR outside the public ranges that sprites may reach through "
            "their egress proxy all the same (repeatable; e.g. 127.0.0.1/32 for a service on "
            "this host). DANGEROUS: by default every loopback, private, link-local and "
            "multicast address is refused, and this lets a sprite whose network policy "
            "allows a name there reach it."
        ),
    ] = None,
    egress_max_connections: Annotated[
        int, typer.Option(help="Connections one sprite may have open through its egress proxy.")
    ] = 256,
    egress_idle_timeout: Annotated[
        float, typer.Option(help="Idle seconds before the egress proxy closes a connection.")
    ] = 600.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Serve the Sprites REST/WebSocket API with real processes in private mount namespaces."""
    import asyncio

    from pydantic import SecretStr, ValidationError

    from lattice_devtools.sprites_local import LauncherError, LocalSpritesConfig, serve

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = LocalSpritesConfig(
            state_dir=state_dir.resolve(),
            token=SecretStr(token),
            host=host,
            port=port,
            organization=organization,
            warm_after=warm_after,
            cold_after=cold_after,
            scrollback_bytes=scrollback,
            ready_file=ready_file,
            isolation=isolation,
            rootfs=rootfs,
            runc=runc,
            sprite_cpus=sprite_cpus,
            sprite_memory_mib=sprite_memory,
            sprite_pids=sprite_pids,
            egress_allow_private=tuple(egress_allow_private or ()),
            egress_max_connections=egress_max_connections,
            egress_idle_timeout=egress_idle_timeout,
        )
    except ValidationError as exc:
        flags = {"scrollback_bytes": "scrollback", "sprite_memory_mib": "sprite_memory"}
        for problem in exc.errors():
            message = str(problem["msg"]).removeprefix("Value error, ")
            if not problem["loc"]:  # a rule across options: its message names them
                typer.echo(f"error: {message}", err=True)
                continue
            field = str(problem["loc"][0])
            name = flags.get(field, field).replace("_", "-")
            typer.echo(f"error: --{name}: {message}", err=True)
        raise typer.Exit(2) from None
    try:
        asyncio.run(serve(config))
    except LauncherError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
