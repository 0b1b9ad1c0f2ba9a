"""Fly: the Machines API over httpx (`FlyMachinesClient` implements
`lattice_operator.ports.fly.FlyMachines`). Errors are those of `lattice_operator.ports.errors`
(see `_errors` for the mapping)."""

from lattice_adapters.fly._client import DEFAULT_API_URL, FlyMachinesClient, auth_header

__all__ = ["DEFAULT_API_URL", "FlyMachinesClient", "auth_header"]
