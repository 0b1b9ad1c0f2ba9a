"""The admission webhook configurations the operator registers for itself.

Two promises shape them:

- **Fail closed for approvals.** A write that touches an approval annotation is
  refused unless the operator's webhook checked it, also while no operator is
  running: the configurations stay in place when the operator stops, with
  `failurePolicy: Fail`. (kopf's own managed mode removes the webhooks on a graceful
  shutdown, which would let anyone who can edit an Intent write approval records
  in another person's name while the operator is down.)
- **Only approval writes depend on the operator.** A `matchConditions` expression
  sends the API server to the webhook only when an Intent carries, or carried, an
  approval annotation; creating, editing and cancelling Intents needs no running
  operator and costs no webhook round trip. Everything else about an Intent is
  checked by the CRD's schema and CEL rules.

IntentPolicy writes that change the spec go through the webhook (rules are compiled there),
so policies cannot be changed while no operator runs. The checks that need no outside read
(who may make an Intent a Run's controller, grant a Secret, map a GitHub approver) are not
webhooks: the API server evaluates them itself (`admission_policy`). What is left here needs
more than the request and CEL: the approval record (a SubjectAccessReview for the `approve`
verb, then the decision merged into a JSON annotation with the time and a SHA-256 digest of
the spec, which a MutatingAdmissionPolicy cannot compute: CEL has no hash and no JSON codec),
a Sprite's run policy (another object), an IntentPolicy's rules (compiled with their cost
bound), a cron schedule and time zone (a parser and the zone database).
"""

from __future__ import annotations

from collections.abc import Mapping
from copy import deepcopy
from typing import Any
from urllib.parse import quote

from lattice_operator.reconcilers.approvals import RECORDS, REQUEST

APPROVAL_HANDLER = "stamp-approval"
"""kopf handler id (and URL path) of the Intent approval webhook."""
POLICY_HANDLER = "check-policy"
"""kopf handler id (and URL path) of the IntentPolicy rule check."""
RUN_POLICY_HANDLER = "check-run-policy"
"""kopf handler id (and URL path) of the check of a Sprite's `spec.runPolicy` on Run creation."""
HEALTH_CHECK_HANDLER = "check-healthcheck"
"""kopf handler id (and URL path) of the HealthCheck schedule and time zone check."""

MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"

# CEL over the AdmissionRequest. `oldObject` exists only for UPDATE; `&&` stops before
# touching it on CREATE.
APPROVAL_MATCH = (
    "(has(object.metadata.annotations) && "
    f"('{REQUEST}' in object.metadata.annotations || "
    f"'{RECORDS}' in object.metadata.annotations)) || "
    "(request.operation == 'UPDATE' && has(oldObject.metadata.annotations) && "
    f"'{RECORDS}' in oldObject.metadata.annotations)"
)


# Only writes that create the object or change its spec: metadata-only writes (finalizers,
# labels, kopf's annotations) cannot make a stored spec invalid.
SPEC_CHANGED_MATCH = (
    "request.operation == 'CREATE' || !has(object.spec) || !has(oldObject.spec) || "
    "object.spec != oldObject.spec"
)


# Only Runs created without one of our Intents as their controller (those the check-run-owner
# policy checks);
# a controller of kind Intent in another group is no Intent of ours and is checked here.
RUN_POLICY_MATCH = (
    "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(r, "
    "r.kind == 'Intent' && r.apiVersion.startsWith('lattice.dev/') && "
    "has(r.controller) && r.controller)"
)


def _client_config(base: Mapping[str, Any], handler: str) -> dict[str, Any]:
    """The server's client config with the handler's path appended (kopf routes by path)."""
    config = deepcopy(dict(base))
    if config.get("url") is not None:
        config["url"] = f"{str(config['url']).rstrip('/')}/{quote(handler)}"
    if config.get("service") is not None:
        service = config["service"]
        service["path"] = f"{service.get('path', '').rstrip('/')}/{quote(handler)}"
    return config


def _webhook(
    name: str, handler: str, plural: str, base: Mapping[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "name": f"{handler}.{name}",
        "clientConfig": _client_config(base, handler),
        "rules": [
            {
                "apiGroups": ["lattice.dev"],
                "apiVersions": ["v1alpha1"],
                "resources": [plural],
                "operations": ["CREATE", "UPDATE"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "admissionReviewVersions": ["v1"],
        **extra,
    }


def webhook_configurations(name: str, client_config: Mapping[str, Any]) -> dict[str, Any]:
    """The Mutating and Validating configuration objects, keyed by their plural.

    `client_config` is what the webhook server reports (`url` or `service`, `caBundle`).
    """
    meta = {"name": name, "labels": {"app.kubernetes.io/managed-by": "lattice-operator"}}
    approval = _webhook(
        name,
        APPROVAL_HANDLER,
        "intents",
        client_config,
        reinvocationPolicy="Never",
        matchConditions=[{"name": "approval-annotations", "expression": APPROVAL_MATCH}],
    )
    policy = _webhook(
        name,
        POLICY_HANDLER,
        "intentpolicies",
        client_config,
        matchConditions=[{"name": "spec-changed", "expression": SPEC_CHANGED_MATCH}],
    )
    # An early, clear refusal; while no operator runs, the API server lets the Run through
    # (failurePolicy Ignore) and the operator refuses it before starting it.
    run_policy = _webhook(
        name,
        RUN_POLICY_HANDLER,
        "runs",
        client_config,
        failurePolicy="Ignore",
        matchConditions=[{"name": "not-from-an-intent", "expression": RUN_POLICY_MATCH}],
    )
    run_policy["rules"][0]["operations"] = ["CREATE"]
    # The schedule and time zone need a cron parser and the zone database, which the CRD's
    # schema cannot hold: refused here early; while no operator runs the check is let through
    # (failurePolicy Ignore) and reported as InvalidSpec in its status instead.
    health = _webhook(
        name,
        HEALTH_CHECK_HANDLER,
        "healthchecks",
        client_config,
        failurePolicy="Ignore",
        matchConditions=[{"name": "spec-changed", "expression": SPEC_CHANGED_MATCH}],
    )
    return {
        MUTATING: {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [approval],
        },
        VALIDATING: {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": deepcopy(meta),
            "webhooks": [policy, run_policy, health],
        },
    }
