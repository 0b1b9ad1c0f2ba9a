"""kubectl's cluster flags for every command that talks to a cluster.

--kubeconfig, --context and -n/--namespace mean what they mean to kubectl; each may be given
before the command (`kubectl lattice --context prod approve x`, as kubectl's global flags) or
after it, the command's own winning. Without -n, the context's namespace."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer._click.globals import get_current_context  # typer vendors click

if TYPE_CHECKING:
    from lattice_adapters.kube import KubeConfig

T = TypeVar("T")

CLUSTER_COMMANDS = frozenset(
    {
        "approve",
        "reject",
        "resume",
        "cancel",
        "logs",
        "watch",
        "mcp",
        "whoami",
        "checkpoints",
        "env",
    }
)
"""The commands that take the cluster flags (and so may be preceded by them)."""

Kubeconfig = Annotated[
    str | None,
    typer.Option(
        "--kubeconfig",
        help="Path to the kubeconfig file (default: $KUBECONFIG's files merged, then "
        "~/.kube/config, then the in-cluster service account).",
        show_default=False,
    ),
]
Context = Annotated[
    str | None,
    typer.Option("--context", help="The kubeconfig context to use (default: current-context)."),
]
Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace", "-n", help="Namespace (default: the context's namespace, else default)."
    ),
]


@dataclass
class Target:
    """Which cluster, as whom, and in which namespace a command works."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace_flag: str | None = None
    _config: KubeConfig | None = field(default=None, repr=False)

    def config(self) -> KubeConfig:
        if self._config is None:
            from lattice_adapters.kube import KubeConfig

            self._config = KubeConfig.load(self.kubeconfig, self.context)
        return self._config

    @property
    def namespace(self) -> str:
        return self.namespace_flag or self.config().namespace

    def call(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """`fn(kube)` with a client for this target, to its end."""
        from lattice_adapters.kube import KubeClient

        config = self.config()

        async def go() -> T:
            async with KubeClient(config) as kube:
                return await fn(kube)

        return asyncio.run(go())


def target(
    kubeconfig: str | None = None, context: str | None = None, namespace: str | None = None
) -> Target:
    """The command's flags over those given before the command."""
    outer = _outer()
    return Target(
        kubeconfig=kubeconfig or outer.kubeconfig,
        context=context or outer.context,
        namespace_flag=namespace or outer.namespace_flag,
    )


def remember(
    ctx: typer.Context,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = None,
) -> None:
    """Cluster flags given before the command (kubectl's global flags)."""
    given = kubeconfig or context or namespace
    if given and ctx.invoked_subcommand not in CLUSTER_COMMANDS:
        from lattice_operator.cli._errors import CliError

        raise CliError(
            f"--kubeconfig, --context and -n before a command apply to "
            f"{', '.join(sorted(CLUSTER_COMMANDS))}; not to {ctx.invoked_subcommand}",
            exit_code=2,
        )
    ctx.obj = Target(kubeconfig, context, namespace)


def _outer() -> Target:
    ctx = get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    found = root.obj if root is not None else None
    return found if isinstance(found, Target) else Target()
