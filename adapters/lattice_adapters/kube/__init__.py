"""A small async Kubernetes API client (aiohttp) for what kopf does not do for us.

kopf watches and patches the objects its handlers are called for; the operator
also posts events.k8s.io Events, creates Runs for Intents, reads Secrets, asks
SubjectAccessReviews, and patches status from long-running daemons at its own
cadence. This client does exactly those REST calls with the credentials kubectl would
use (kubeconfig, exec credential plugins, or in-cluster service account).
"""

from lattice_adapters.kube.api_errors import (
    AlreadyExists,
    BadRequest,
    Cause,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    KubeApiError,
    NotFound,
    PatchTestFailed,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    api_error,
    failed_tests,
)
from lattice_adapters.kube.client import (
    InvalidName,
    KubeClient,
    check_name,
    check_namespace,
    resource_path,
)
from lattice_adapters.kube.config import KubeConfig, use_by_default
from lattice_adapters.kube.errors import KubeConfigError
from lattice_adapters.kube.exec_plugin import Credentials

__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Cause",
    "Conflict",
    "Credentials",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "InvalidName",
    "KubeApiError",
    "KubeClient",
    "KubeConfig",
    "KubeConfigError",
    "NotFound",
    "PatchTestFailed",
    "ServerTimeout",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "api_error",
    "check_name",
    "check_namespace",
    "failed_tests",
    "resource_path",
    "use_by_default",
]
