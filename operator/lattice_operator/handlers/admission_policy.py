"""The admission checks the API server evaluates itself (ValidatingAdmissionPolicies).

A check that needs nothing but the request — who writes, what they write, and the API
server's own authorizer — is a CEL policy, not a webhook: no TLS round trip to the operator
on the write path, and no dependency on a running operator. Each is bound with
`validationActions: [Deny]` and `failurePolicy: Fail`: an expression that cannot be evaluated
refuses the write.

- `check-run-owner`: only the operator makes an Intent a Run's controller (grants follow
  that reference).
- `check-grants`: an Intent's author may hand a sprite only Secrets they may `get`.
- `check-approvers`: mapping a GitHub account to a Kubernetes user (and groups) needs the
  right to impersonate them, unless it maps to the writer alone.

Each refusal names the field and what is needed, as the webhooks did. The operator registers
these in dev/test (`webhook.managed`) next to its webhook configurations; the chart ships the
same objects (`charts/lattice-operator/templates/admission-policy.yaml`, compared by a test).
"""

from __future__ import annotations

import json
from typing import Any

RUN_OWNER_POLICY = "check-run-owner"
GRANTS_POLICY = "check-grants"
APPROVERS_POLICY = "check-approvers"

POLICIES = "validatingadmissionpolicies"
BINDINGS = "validatingadmissionpolicybindings"

# matchConditions: which writes a policy looks at. `oldObject` is null on CREATE; `||` stops
# before reading it.

GRANTS_MATCH = (
    "has(object.spec.credentials) && size(object.spec.credentials) > 0 && "
    "(request.operation == 'CREATE' || !has(oldObject.spec.credentials) || "
    "object.spec.credentials != oldObject.spec.credentials)"
)
"""Only writes that add or change credential grants."""

RUN_OWNER_MATCH = (
    "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
    "r.kind == 'Intent' && r.apiVersion.startsWith('lattice.dev/') && "
    "has(r.controller) && r.controller) && "
    "(request.operation == 'CREATE' || !has(oldObject.metadata.ownerReferences) || "
    "object.metadata.ownerReferences != oldObject.metadata.ownerReferences)"
)
"""Only writes that give a Run an Intent as its controller (the mark of a Run an Intent made)."""

APPROVERS_MATCH = (
    "has(object.spec.approval) && has(object.spec.approval.approvers) && "
    "size(object.spec.approval.approvers) > 0 && (request.operation == 'CREATE' || "
    "!has(oldObject.spec.approval) || !has(oldObject.spec.approval.approvers) || "
    "object.spec.approval.approvers != oldObject.spec.approval.approvers)"
)
"""Only writes that add or change a GitHubRepository's GitHub → Kubernetes approver mapping."""

# Variables, in order (a variable reads only earlier ones); neither asks the authorizer, so the
# unit tests evaluate them with cel-python.

GRANTED_BEFORE = (
    "request.operation == 'CREATE' || !has(oldObject.spec.credentials) ? [] : "
    "oldObject.spec.credentials.map(g, g.secretKeyRef.name)"
)
"""The Secrets the Intent granted before this write: granting one again (renamed) is no new
access."""
NEW_GRANTS = "object.spec.credentials.filter(g, !(g.secretKeyRef.name in variables.before))"
"""Grants of Secrets not granted before: what the writer must be allowed to read."""

MAPPED_BEFORE = (
    "request.operation == 'CREATE' || !has(oldObject.spec.approval) || "
    "!has(oldObject.spec.approval.approvers) ? [] : oldObject.spec.approval.approvers"
)
"""The mappings the repository had before this write (unchanged ones are not checked again)."""
NEW_MAPPINGS = (
    "object.spec.approval.approvers.filter(m, !(m in variables.before) && "
    "!(m.user == request.userInfo.username && (!has(m.groups) || size(m.groups) == 0)))"
)
"""Mappings added or changed, but for one mapping an account to the writer alone."""

# One validation per list position, up to the schema's maxItems: a messageExpression cannot
# ask the authorizer (nor read a variable that does), so the position that failed is told by
# which validation failed; the first failing one is the refusal's message. `{i}` is the
# position (the chart's `range` writes the same expressions).

MAX_GRANTS = 16
"""spec.credentials' maxItems (a unit test holds the two equal)."""
MAX_MAPPINGS = 64
"""spec.approval.approvers' maxItems (likewise)."""

GRANT_ALLOWED = (
    "size(variables.added) <= {i} || authorizer.group('').resource('secrets')"
    ".namespace(object.metadata.namespace).name(variables.added[{i}].secretKeyRef.name)"
    ".check('get').allowed()"
)
GRANT_REFUSED = (
    "'spec.credentials[' + "
    "string(object.spec.credentials.map(c, c.name).indexOf(variables.added[{i}].name)) + "
    "'] (' + variables.added[{i}].name + '): ' + request.userInfo.username + "
    "' may not read Secret ' + variables.added[{i}].secretKeyRef.name + ' in namespace ' + "
    "object.metadata.namespace + ', so may not grant it to a sprite'"
)
_MAPPING = (
    "'spec.approval.approvers[' + string(object.spec.approval.approvers.map(a, a.github)"
    ".indexOf(variables.added[{i}].github)) + '] (' + variables.added[{i}].github + '): ' + "
    "request.userInfo.username + ' may not map a GitHub account to "
)
USER_ALLOWED = (
    "size(variables.added) <= {i} || authorizer.group('').resource('users')"
    ".name(variables.added[{i}].user).check('impersonate').allowed()"
)
USER_REFUSED = (
    _MAPPING + "user ' + variables.added[{i}].user + ': that needs the right to impersonate it'"
)
GROUPS_ALLOWED = (
    "size(variables.added) <= {i} || !has(variables.added[{i}].groups) || "
    "variables.added[{i}].groups.all(g, authorizer.group('').resource('groups').name(g)"
    ".check('impersonate').allowed())"
)
GROUPS_REFUSED = (
    _MAPPING + "the groups ' + variables.added[{i}].groups.join(', ') + "
    "': that needs the right to impersonate each of them'"
)


def _positions(count: int, *pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [
        {"expression": rule.format(i=i), "messageExpression": message.format(i=i)}
        for i in range(count)
        for rule, message in pairs
    ]


_LABELS = {"app.kubernetes.io/managed-by": "lattice-operator"}


def cel_string(value: str) -> str:
    """A CEL string literal (JSON's escapes are CEL's; `/` is never escaped by json)."""
    return json.dumps(value)


def run_owner_rule(operator: str | None) -> str:
    """The operator's identity (a SelfSubjectReview's, or the chart's ServiceAccount) is the
    only writer allowed; without one, nobody is."""
    return "false" if operator is None else f"request.userInfo.username == {cel_string(operator)}"


def _policy(
    name: str,
    check: str,
    plural: str,
    match: tuple[str, str],
    validations: list[dict[str, str]],
    variables: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "matchPolicy": "Equivalent",
            "resourceRules": [
                {
                    "apiGroups": ["lattice.dev"],
                    "apiVersions": ["v1alpha1"],
                    "resources": [plural],
                    "operations": ["CREATE", "UPDATE"],
                    "scope": "Namespaced",
                }
            ],
        },
        "matchConditions": [{"name": match[0], "expression": match[1]}],
    }
    if variables:
        spec["variables"] = [{"name": n, "expression": e} for n, e in variables]
    spec["validations"] = [{**v, "reason": "Forbidden"} for v in validations]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"{check}.{name}", "labels": dict(_LABELS)},
        "spec": spec,
    }


def _binding(policy: dict[str, Any]) -> dict[str, Any]:
    name = policy["metadata"]["name"]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(_LABELS)},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }


def admission_policies(name: str, operator: str | None) -> dict[str, list[dict[str, Any]]]:
    """The policies and their bindings, keyed by plural (policies first: a binding names its
    policy). `name` suffixes each object's name; `operator` is the operator's user name."""
    policies = [
        _policy(
            name,
            RUN_OWNER_POLICY,
            "runs",
            ("intent-controller", RUN_OWNER_MATCH),
            [
                {
                    "expression": run_owner_rule(operator),
                    "messageExpression": (
                        "request.userInfo.username + ' may not make an Intent the controller "
                        "of a Run: only the operator creates the Runs Intents execute through'"
                    ),
                }
            ],
        ),
        _policy(
            name,
            GRANTS_POLICY,
            "intents",
            ("credential-grants", GRANTS_MATCH),
            _positions(MAX_GRANTS, (GRANT_ALLOWED, GRANT_REFUSED)),
            [("before", GRANTED_BEFORE), ("added", NEW_GRANTS)],
        ),
        _policy(
            name,
            APPROVERS_POLICY,
            "githubrepositories",
            ("approver-mapping", APPROVERS_MATCH),
            _positions(
                MAX_MAPPINGS, (USER_ALLOWED, USER_REFUSED), (GROUPS_ALLOWED, GROUPS_REFUSED)
            ),
            [("before", MAPPED_BEFORE), ("added", NEW_MAPPINGS)],
        ),
    ]
    return {POLICIES: policies, BINDINGS: [_binding(p) for p in policies]}
