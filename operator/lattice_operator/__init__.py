"""Lattice Operator: Kubernetes as the control plane for AI-agent sandboxes."""

__all__ = ["__version__"]

__version__ = "0.2.0"
