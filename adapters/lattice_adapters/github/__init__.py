"""The forge: GitHub through githubkit, and git on the operator's side.

`GitHubForge` implements `lattice_operator.ports.forge.Forge` with a `TokenSource`: a
fine-grained token (`StaticToken`) or a GitHub App's installation tokens
(`AppInstallationTokens`, cached and refreshed before expiry). Errors are those of
`lattice_operator.ports.errors` (see `_errors` for the mapping).
"""

from lattice_adapters.github._auth import (
    AppInstallationTokens,
    StaticToken,
    TokenSource,
    git_auth_header,
)
from lattice_adapters.github._forge import DEFAULT_API_URL, GitHubForge
from lattice_adapters.github._git import GitError, parse_bundle_header

__all__ = [
    "DEFAULT_API_URL",
    "AppInstallationTokens",
    "GitError",
    "GitHubForge",
    "StaticToken",
    "TokenSource",
    "git_auth_header",
    "parse_bundle_header",
]
