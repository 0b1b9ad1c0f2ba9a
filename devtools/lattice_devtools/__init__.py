"""The dev tools: what a developer's machine and the test suite run, never a cluster.

A distribution of its own (`lattice-devtools`, devtools/pyproject.toml) beside the operator's:
the local Sprites-compatible server (`sprites_local`), the local control plane and single-node
cluster (`localcluster`), the whole stack for `lattice dev` (`devstack`), and their commands
(`cli`), which `lattice` finds through the entry point group `lattice.cli_commands`.
"""

__all__: list[str] = []
