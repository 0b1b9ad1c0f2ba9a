"""The RBAC audit of the first installation, once every module before it has used it: in the
API server's audit log every request of the operator's ServiceAccount was allowed, and every
grant of its ClusterRole and Roles was used but for tests.support.node_audit's
UNEXERCISED_GRANTS (each with its reason).
"""

from __future__ import annotations

import pytest

from lattice_devtools.localcluster.node import NodeCluster
from tests.support.node_audit import UNEXERCISED_GRANTS, audit_log_check, granted
from tests.support.node_e2e import NAMESPACE, RELEASE

pytestmark = pytest.mark.node


def test_audit_log_shows_every_operator_request_allowed_and_every_grant_used(
    installed: NodeCluster,
) -> None:
    user = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-lattice-operator"
    grants = granted(installed, RELEASE, [NAMESPACE])
    audit_log_check(installed, user, grants, 0, UNEXERCISED_GRANTS)
