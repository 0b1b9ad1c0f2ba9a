"""A GitHubRepository of the webhook examples' repository, for the forge's unit tests."""

from __future__ import annotations

from typing import Any

from lattice_operator.api.v1alpha1.githubrepository import GitHubRepository

REPO = "Codertocat/Hello-World"  # the examples' repository


def repository(**spec: Any) -> GitHubRepository:
    return GitHubRepository.model_validate(
        {
            "metadata": {"name": "hello", "namespace": "team"},
            "spec": {
                "repo": REPO,
                "webhookSecretRef": {"name": "hook", "key": "secret"},
                "agent": {"spriteRef": {"name": "box"}, "command": ["agent"]},
                **spec,
            },
        }
    )
