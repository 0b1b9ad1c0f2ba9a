"""The dev tools' commands: `lattice dev`, `lattice cluster` and `lattice sprites-local`,
added to `lattice` through the entry point group `lattice.cli_commands` (devtools/pyproject.toml
names each module's command)."""

__all__: list[str] = []
