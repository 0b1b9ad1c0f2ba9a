"""The five kinds of `lattice.dev/v1alpha1` as API resources: named once, used everywhere
(kopf handlers, request paths, the CLI, the MCP tools)."""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "lattice.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


@dataclass(frozen=True)
class Resource:
    """One kind's group, version, plural and kind."""

    plural: str
    kind: str
    group: str = GROUP
    version: str = VERSION

    @property
    def gvp(self) -> tuple[str, str, str]:
        """(group, version, plural): what kopf decorators and `resource_path` take first."""
        return (self.group, self.version, self.plural)


SPRITES = Resource("sprites", "Sprite")
RUNS = Resource("runs", "Run")
INTENTS = Resource("intents", "Intent")
INTENT_POLICIES = Resource("intentpolicies", "IntentPolicy")
HEALTH_CHECKS = Resource("healthchecks", "HealthCheck")
GITHUB_REPOSITORIES = Resource("githubrepositories", "GitHubRepository")
SPRITE_CHECKPOINTS = Resource("spritecheckpoints", "SpriteCheckpoint")
ENVIRONMENTS = Resource("environments", "Environment")
"""Cluster-scoped: the cluster-wide environment (`default`)."""
RESOURCES = (
    SPRITES,
    RUNS,
    INTENTS,
    INTENT_POLICIES,
    HEALTH_CHECKS,
    GITHUB_REPOSITORIES,
    SPRITE_CHECKPOINTS,
    ENVIRONMENTS,
)


def resource_of_kind(kind: str) -> Resource:
    """The resource of a kind name (`Run` → runs); KeyError for another kind."""
    for resource in RESOURCES:
        if resource.kind == kind:
            return resource
    raise KeyError(kind)


__all__ = [
    "API_VERSION",
    "ENVIRONMENTS",
    "GITHUB_REPOSITORIES",
    "GROUP",
    "HEALTH_CHECKS",
    "INTENTS",
    "INTENT_POLICIES",
    "RESOURCES",
    "RUNS",
    "SPRITES",
    "SPRITE_CHECKPOINTS",
    "VERSION",
    "Resource",
    "resource_of_kind",
]
