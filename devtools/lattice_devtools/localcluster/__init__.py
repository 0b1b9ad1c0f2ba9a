"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager).

Built from pinned Go modules by `hack/build-tools.sh`; started on 127.0.0.1 with
free ports and a throwaway data directory. Used by `make cluster-up`, `make dev`
and the test suite when no KUBECONFIG is given.
"""

from lattice_devtools.localcluster.controlplane import (
    ControlPlaneError,
    LocalControlPlane,
    find_bin_dir,
    stop_from_state,
)

__all__ = ["ControlPlaneError", "LocalControlPlane", "find_bin_dir", "stop_from_state"]
