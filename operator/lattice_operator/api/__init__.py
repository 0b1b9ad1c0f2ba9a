"""The CRD contract: pydantic models per kind and version; crds/ is generated from them."""

GROUP = "lattice.dev"  # also api.v1alpha1.resources.GROUP

__all__ = ["GROUP"]
