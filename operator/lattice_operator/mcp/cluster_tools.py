"""`lattice mcp --cluster`: Sprites, Runs and Intents as tools for a person's agent.

Every call goes to the API server with the caller's kubeconfig identity (the same client
the CLI uses), so RBAC decides what the agent sees and does; a refusal comes back as a
FORBIDDEN tool error, never as a hidden empty answer. There is deliberately no approval
tool: an approval must carry a person's identity, and an agent holding the person's
credentials would approve in their name without them (see docs/mcp.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import JsonValue

from lattice_operator.api.v1alpha1.resources import GROUP, VERSION
from lattice_operator.mcp.checkpoint_tools import (
    GENERATED,
    LIST_CHECKPOINTS,
    NAMESPACE,
    PROPOSE_RESTORE,
    TAKE_CHECKPOINT,
    checked_name,
)
from lattice_operator.mcp.errors import ToolError
from lattice_operator.mcp.tool_input import Tool, ToolInput, tool

Kind = Literal["sprites", "runs", "intents"]


class ListInput(ToolInput):
    kind: Kind
    namespace: str | None = NAMESPACE
    all_namespaces: bool | None = None


class GetInput(ToolInput):
    kind: Kind
    name: str
    namespace: str | None = NAMESPACE


class RunInput(ToolInput):
    name: str
    namespace: str | None = NAMESPACE


class ProposeIntentInput(ToolInput):
    spec: dict[str, JsonValue]
    name: str | None = GENERATED
    namespace: str | None = NAMESPACE


def _namespace(value: str | None) -> str:
    from lattice_adapters.kube import InvalidName, check_namespace

    if value == "":
        raise ToolError(
            "INVALID_ARGUMENT",
            "Parameter 'namespace' must be a non-empty string",
            "Pass a namespace's name",
        )
    try:
        return check_namespace(value or "default")
    except InvalidName as err:
        raise ToolError(
            "INVALID_ARGUMENT", f"Parameter 'namespace': {err}", "Pass a namespace's name"
        ) from None


def _path(plural: str, namespace: str | None, name: str | None = None) -> str:
    from lattice_adapters.kube import resource_path

    return resource_path(GROUP, VERSION, plural, namespace, name)


def translate(err: Exception, what: str) -> ToolError:
    """A Kubernetes API error as the agent should see it (RBAC refusals stay visible)."""
    status = getattr(err, "status", None)
    message = getattr(err, "message", str(err))
    if status in (401, 403):
        return ToolError(
            "FORBIDDEN",
            f"{what}: {message}",
            "Your kubeconfig identity lacks the permission; ask a cluster admin for a role",
        )
    if status == 404:
        return ToolError("NOT_FOUND", f"{what}: {message}", "Check the name and namespace")
    if status in (400, 409, 422):
        return ToolError("INVALID", f"{what}: {message}", "Fix the object and try again")
    return ToolError("KUBE_ERROR", f"{what}: {message}", "Check the cluster and try again")


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": metadata}


def _summary(obj: dict[str, Any]) -> dict[str, Any]:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "phase": status.get("phase"),
        "created": meta.get("creationTimestamp"),
    }


async def list_objects(kube: Any, args: ListInput) -> dict[str, Any]:
    kind = args.kind
    namespace = None if args.all_namespaces is True else _namespace(args.namespace)
    listing = await kube.get(_path(kind, namespace))
    items = [_summary(o) for o in listing.get("items", [])]
    return {"kind": kind, "items": items, "count": len(items)}


async def get_object(kube: Any, args: GetInput) -> dict[str, Any]:
    name = checked_name(args.name, "name")
    obj = await kube.get(_path(args.kind, _namespace(args.namespace), name))
    return _slim(obj)


async def run_events(kube: Any, args: RunInput) -> dict[str, Any]:
    run = await kube.get(_path("runs", _namespace(args.namespace), checked_name(args.name, "name")))
    status = run.get("status") or {}
    return {
        "phase": status.get("phase"),
        "events": status.get("events") or {},
        "log_tail": status.get("logTail") or [],
    }


async def run_receipts(kube: Any, args: RunInput) -> dict[str, Any]:
    from lattice_adapters.kube import resource_path
    from lattice_operator.receipt_reader import receipt_event_params, receipts_from_events

    namespace = _namespace(args.namespace)
    run = await kube.get(_path("runs", namespace, checked_name(args.name, "name")))
    listing = await kube.get(
        resource_path("events.k8s.io", "v1", "events", namespace), receipt_event_params(run)
    )
    receipts, untrusted = receipts_from_events(listing)
    # Events with our receipt annotation that the operator did not report are left out.
    return {"receipts": receipts, "count": len(receipts), "untrusted": untrusted}


async def propose_intent(kube: Any, args: ProposeIntentInput) -> dict[str, Any]:
    namespace = _namespace(args.namespace)
    metadata: dict[str, Any] = (
        {"name": checked_name(args.name, "name")}
        if args.name
        else {"generateName": "agent-intent-"}
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Intent",
        "metadata": metadata,
        "spec": args.spec,
    }
    created = await kube.create(_path("intents", namespace), body)
    return {
        **_summary(created),
        "note": "Proposed. Policy decides; if it needs approval, a person approves it with "
        "`lattice approve` under their own identity.",
    }


Handler = Awaitable[dict[str, Any]]
CLUSTER_TOOLS: tuple[Tool[Any, Handler], ...] = (
    tool(
        "lattice_cluster_list",
        "List Sprites, Runs or Intents (name, namespace, phase) that your identity may see.",
        ListInput,
        list_objects,
    ),
    tool(
        "lattice_cluster_get",
        "Get one Sprite, Run or Intent (spec and status).",
        GetInput,
        get_object,
    ),
    tool(
        "lattice_cluster_run_events",
        "A Run's protocol events as the operator committed them (counts, recent, waiting, "
        "completion, violations) and its log tail.",
        RunInput,
        run_events,
    ),
    tool(
        "lattice_cluster_run_receipts",
        "A Run's Lifeloop receipts, in sequence order.",
        RunInput,
        run_receipts,
    ),
    tool(
        "lattice_cluster_propose_intent",
        "Propose an Intent (its spec as in manifests/samples/intent-*.yaml). Policy decides; "
        "approval, when needed, is a person's act and not a tool.",
        ProposeIntentInput,
        propose_intent,
    ),
    LIST_CHECKPOINTS,
    TAKE_CHECKPOINT,
    PROPOSE_RESTORE,
)


def cluster_dispatch(
    context: str | None = None, kubeconfig: str | None = None, namespace: str | None = None
) -> Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]:
    """Calls a cluster tool with a client for the caller's kubeconfig (one per call; the
    kubeconfig is read once, so an exec plugin's credentials are reused until they expire).
    A tool's namespace defaults to `namespace`, else the context's."""
    tools = {t.name: t for t in CLUSTER_TOOLS}
    loaded: list[Any] = []

    def config() -> Any:
        from lattice_adapters.kube import KubeConfig, KubeConfigError

        if not loaded:
            try:
                loaded.append(KubeConfig.load(kubeconfig, context))
            except (KubeConfigError, OSError, ValueError) as err:
                raise ToolError(
                    "NO_KUBECONFIG", f"cannot load a kubeconfig: {err}", "Set KUBECONFIG"
                ) from None
        return loaded[0]

    async def dispatch(name: str, args: dict[str, Any]) -> dict[str, Any]:
        import aiohttp

        from lattice_adapters.kube import KubeApiError, KubeClient, KubeConfigError

        kube_config = config()
        if "namespace" not in args:
            args = {**args, "namespace": namespace or kube_config.namespace}
        try:
            async with KubeClient(kube_config, user_agent="lattice-mcp") as kube:
                return await tools[name].run(kube, args)
        except KubeConfigError as err:  # an exec credential plugin failed
            raise ToolError(
                "NO_CREDENTIALS", f"{name}: {err}", "Fix the kubeconfig's user"
            ) from None
        except KubeApiError as err:
            raise translate(err, name) from None
        except aiohttp.ClientError as err:
            raise ToolError(
                "KUBE_UNREACHABLE", f"{name}: {err}", "Check the cluster address in your kubeconfig"
            ) from None

    return dispatch


__all__ = ["CLUSTER_TOOLS", "cluster_dispatch", "translate"]
