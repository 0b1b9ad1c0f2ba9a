"""`lattice mcp --cluster`: Sprites, Runs and Intents as tools for a person's agent.

Every call goes to the API server with the caller's kubeconfig identity (the same client
the CLI uses), so RBAC decides what the agent sees and does; a refusal comes back as a
FORBIDDEN tool error, never as a hidden empty answer. There is deliberately no approval
tool: an approval must carry a person's identity, and an agent holding the person's
credentials would approve in their name without them (see docs/mcp.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from lattice_operator.api.v1alpha1.resources import GROUP, VERSION
from lattice_operator.mcp.checkpoint_tools import (
    list_checkpoints,
    propose_restore,
    take_checkpoint,
)
from lattice_operator.mcp.errors import ToolError

KINDS = ("sprites", "runs", "intents")
ClusterHandler = Callable[[Any, Mapping[str, Any]], Awaitable[dict[str, Any]]]


def _str(args: Mapping[str, Any], name: str, default: str | None = None) -> str:
    value = args.get(name, default)
    if not isinstance(value, str) or not value:
        raise ToolError(
            "INVALID_ARGUMENT",
            f"Parameter '{name}' must be a non-empty string",
            "Check the tool's input schema with tools/list",
        )
    return value


def _name(args: Mapping[str, Any], name: str = "name") -> str:
    """An object name Kubernetes would accept, else INVALID_ARGUMENT naming the parameter."""
    from lattice_adapters.kube import InvalidName, check_name

    try:
        return check_name(_str(args, name))
    except InvalidName as err:
        raise ToolError(
            "INVALID_ARGUMENT", f"Parameter '{name}': {err}", "Pass the object's name as shown"
        ) from None


def _namespace(args: Mapping[str, Any]) -> str:
    from lattice_adapters.kube import InvalidName, check_namespace

    try:
        return check_namespace(_str(args, "namespace", "default"))
    except InvalidName as err:
        raise ToolError(
            "INVALID_ARGUMENT", f"Parameter 'namespace': {err}", "Pass a namespace's name"
        ) from None


def _kind(args: Mapping[str, Any]) -> str:
    kind = args.get("kind")
    if kind not in KINDS:
        raise ToolError(
            "INVALID_ARGUMENT", f"kind {kind!r} is not one of {', '.join(KINDS)}", "Pick one"
        )
    return str(kind)


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


async def list_objects(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    kind = _kind(args)
    namespace = None if args.get("all_namespaces") is True else _namespace(args)
    listing = await kube.get(_path(kind, namespace))
    items = [_summary(o) for o in listing.get("items", [])]
    return {"kind": kind, "items": items, "count": len(items)}


async def get_object(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    kind, name = _kind(args), _name(args)
    obj = await kube.get(_path(kind, _namespace(args), name))
    return _slim(obj)


async def run_events(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    run = await kube.get(_path("runs", _namespace(args), _name(args)))
    status = run.get("status") or {}
    return {
        "phase": status.get("phase"),
        "events": status.get("events") or {},
        "log_tail": status.get("logTail") or [],
    }


async def run_receipts(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    from lattice_adapters.kube import resource_path
    from lattice_operator.receipt_reader import receipt_event_params, receipts_from_events

    namespace = _namespace(args)
    run = await kube.get(_path("runs", namespace, _name(args)))
    listing = await kube.get(
        resource_path("events.k8s.io", "v1", "events", namespace), receipt_event_params(run)
    )
    receipts, untrusted = receipts_from_events(listing)
    # Events with our receipt annotation that the operator did not report are left out.
    return {"receipts": receipts, "count": len(receipts), "untrusted": untrusted}


async def propose_intent(kube: Any, args: Mapping[str, Any]) -> dict[str, Any]:
    namespace = _namespace(args)
    spec = args.get("spec")
    if not isinstance(spec, dict):
        raise ToolError(
            "INVALID_ARGUMENT", "Parameter 'spec' must be an object", "Pass the Intent's spec"
        )
    metadata: dict[str, Any] = (
        {"name": _name(args)} if args.get("name") else {"generateName": "agent-intent-"}
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Intent",
        "metadata": metadata,
        "spec": spec,
    }
    created = await kube.create(_path("intents", namespace), body)
    return {
        **_summary(created),
        "note": "Proposed. Policy decides; if it needs approval, a person approves it with "
        "`lattice approve` under their own identity.",
    }


_NS = {
    "type": "string",
    "description": "Namespace (default: the kubeconfig context's, else default)",
}
_KIND = {"type": "string", "enum": list(KINDS)}


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


CLUSTER_TOOLS: tuple[tuple[str, str, dict[str, Any], ClusterHandler], ...] = (
    (
        "lattice_cluster_list",
        "List Sprites, Runs or Intents (name, namespace, phase) that your identity may see.",
        _schema({"kind": _KIND, "namespace": _NS, "all_namespaces": {"type": "boolean"}}, ["kind"]),
        list_objects,
    ),
    (
        "lattice_cluster_get",
        "Get one Sprite, Run or Intent (spec and status).",
        _schema({"kind": _KIND, "name": {"type": "string"}, "namespace": _NS}, ["kind", "name"]),
        get_object,
    ),
    (
        "lattice_cluster_run_events",
        "A Run's protocol events as the operator committed them (counts, recent, waiting, "
        "completion, violations) and its log tail.",
        _schema({"name": {"type": "string"}, "namespace": _NS}, ["name"]),
        run_events,
    ),
    (
        "lattice_cluster_run_receipts",
        "A Run's Lifeloop receipts, in sequence order.",
        _schema({"name": {"type": "string"}, "namespace": _NS}, ["name"]),
        run_receipts,
    ),
    (
        "lattice_cluster_propose_intent",
        "Propose an Intent (its spec as in manifests/samples/intent-*.yaml). Policy decides; "
        "approval, when needed, is a person's act and not a tool.",
        _schema(
            {
                "spec": {"type": "object"},
                "name": {"type": "string", "description": "Default: a generated name"},
                "namespace": _NS,
            },
            ["spec"],
        ),
        propose_intent,
    ),
    (
        "lattice_cluster_checkpoints_list",
        "A Sprite's checkpoints: its newest backend checkpoints (Runs' too) and the "
        "SpriteCheckpoint objects that hold some (name, phase, checkpoint id, comment).",
        _schema({"sprite": {"type": "string"}, "namespace": _NS}, ["sprite"]),
        list_checkpoints,
    ),
    (
        "lattice_cluster_checkpoint_take",
        "Take a checkpoint of a Sprite's filesystem: creates a SpriteCheckpoint (deleting it "
        "later deletes the backend checkpoint).",
        _schema(
            {
                "sprite": {"type": "string"},
                "comment": {"type": "string", "maxLength": 1024},
                "name": {"type": "string", "description": "Default: a generated name"},
                "namespace": _NS,
            },
            ["sprite"],
        ),
        take_checkpoint,
    ),
    (
        "lattice_cluster_checkpoint_propose_restore",
        "Propose rolling a Sprite back to a checkpoint (a checkpoint_restore Intent): give "
        "'checkpoint' (a SpriteCheckpoint) or 'checkpoint_id' (v3). Policy decides; approval, "
        "when needed, is a person's act and not a tool.",
        _schema(
            {
                "sprite": {"type": "string"},
                "checkpoint": {"type": "string"},
                "checkpoint_id": {"type": "string"},
                "name": {"type": "string", "description": "Default: a generated name"},
                "namespace": _NS,
            },
            ["sprite"],
        ),
        propose_restore,
    ),
)


def cluster_dispatch(
    context: str | None = None, kubeconfig: str | None = None, namespace: str | None = None
) -> Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]:
    """Calls a cluster tool with a client for the caller's kubeconfig (one per call; the
    kubeconfig is read once, so an exec plugin's credentials are reused until they expire).
    A tool's namespace defaults to `namespace`, else the context's."""
    handlers = {name: handler for name, _, _, handler in CLUSTER_TOOLS}
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
                return await handlers[name](kube, args)
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
