"""The CRD contract: pydantic models per kind and version; crds/ is generated from them."""

GROUP = "lattice.dev"

__all__ = ["GROUP"]
