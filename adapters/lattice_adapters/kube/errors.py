"""The kube package's configuration error (its API errors are in client.py)."""


class KubeConfigError(RuntimeError):
    """No usable Kubernetes credentials were found, or a credential plugin failed."""
