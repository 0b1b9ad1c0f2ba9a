"""Approvals that cannot be forged: what the admission webhook decides, as pure functions.

`lattice approve` asks by setting the annotation REQUEST; the operator's mutating
admission webhook sees the identity the API server authenticated, checks it may
`approve` intents.lattice.dev in the namespace (a SubjectAccessReview), and turns
the request into a record in RECORDS, stamped with that identity and with the
digest of the spec as it is at that moment (`spec_digest`). RECORDS is written only
by the webhook: any other change to it is refused.

An approval is bound to the spec it was given for: the gate counts only records
whose digest is the current spec's (`for_spec`), so an edit after an approval (by
anyone who may edit the Intent) resets the approvals instead of inheriting them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from lattice_operator.api.v1alpha1.intent import UNFROZEN_FIELDS, ApprovalRecord, IntentSpec
from lattice_operator.errors import LatticeError

REQUEST = "approval.lattice.dev/request"
RECORDS = "approval.lattice.dev/records"
MAX_RECORDS = 20

_RECORDS = TypeAdapter(list[ApprovalRecord])


class ApprovalRefused(LatticeError):
    """The admission request must be refused (with this message and HTTP code)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ApprovalRequest:
    decision: str
    reason: str
    spec_digest: str | None = None
    """The spec the approver looked at (`lattice approve` sends it): refused if it changed."""
    forge_user: str | None = None
    """A decision made on GitHub: the GitHub login (only the operator may relay one)."""
    user: str | None = None
    """...and the Kubernetes user it is mapped to (whose rights are checked)."""
    groups: tuple[str, ...] = ()
    """That user's groups, as the mapping gives them."""
    forge_ref: str | None = None
    """Where on GitHub (a comment's URL, a label event): one record per place."""

    def subject(self, requester: dict[str, Any]) -> dict[str, Any]:
        """Whose right to approve is checked: the mapped user for a GitHub decision."""
        if self.forge_user is None:
            return requester
        return {"username": self.user or "", "groups": list(self.groups)}


def parse_records(annotations: dict[str, str] | None) -> list[ApprovalRecord]:
    """The approval records on an object (an empty list when there are none)."""
    raw = (annotations or {}).get(RECORDS)
    if not raw:
        return []
    try:
        return _RECORDS.validate_json(raw)
    except ValidationError:
        return []  # not ours: the webhook never writes anything else


def spec_digest(spec: IntentSpec) -> str:
    """sha256 of the spec's canonical JSON, without the fields that stay mutable after
    approval (cancel, resume): what an approval is given for."""
    wire = spec.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude=set(UNFROZEN_FIELDS)
    )
    canonical = json.dumps(wire, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def raw_spec_digest(spec: Mapping[str, Any] | None) -> str:
    """`spec_digest` of a spec as the webhook sees it (a dict); an invalid one is refused."""
    try:
        return spec_digest(IntentSpec.model_validate(dict(spec or {})))
    except ValidationError as exc:
        raise ApprovalRefused(f"cannot decide on an invalid spec: {exc}", 422) from exc


@dataclass(frozen=True)
class Decisions:
    """The records that count for the current spec, and the ones an edit made stale."""

    current: list[ApprovalRecord]
    stale: list[ApprovalRecord]

    def stale_approvers(self) -> list[str]:
        """Who approved an earlier spec and has not decided on this one (sorted)."""
        now = {r.user for r in self.current}
        return sorted({r.user for r in self.stale if r.decision == "approve"} - now)


def for_spec(records: Sequence[ApprovalRecord], digest: str) -> Decisions:
    """Split the records by whether they were made for the spec with this digest.

    Records without a digest (written before approvals were bound to the spec) count as
    stale. So does a rejection of an earlier spec: each decision is about the spec its
    author saw, and the edited spec needs fresh approvals anyway, so nothing unreviewed
    runs; an approver who still objects rejects again.
    """
    current = [r for r in records if r.spec_digest == digest]
    stale = [r for r in records if r.spec_digest != digest]
    return Decisions(current=current, stale=stale)


def parse_request(annotations: dict[str, str] | None) -> ApprovalRequest | None:
    """The approval request on an object, if any; a malformed one is refused."""
    raw = (annotations or {}).get(REQUEST)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ApprovalRefused(f"{REQUEST} is not JSON: {exc}", 400) from exc
    decision = data.get("decision") if isinstance(data, dict) else None
    if decision not in ("approve", "reject"):
        raise ApprovalRefused(f"{REQUEST}: decision must be approve or reject", 400)
    reason = data.get("reason") or ""
    if not isinstance(reason, str) or len(reason) > 1024:
        raise ApprovalRefused(f"{REQUEST}: reason must be a string of at most 1024 characters", 400)
    pinned = data.get("specDigest")
    if pinned is not None and (not isinstance(pinned, str) or len(pinned) > 80):
        raise ApprovalRefused(f"{REQUEST}: specDigest must be a digest string", 400)
    forge: dict[str, Any] = {}
    if data.get("forgeUser") is not None:
        user, groups, ref = data.get("user"), data.get("groups") or [], data.get("forgeRef")
        if not isinstance(user, str) or not user or not isinstance(ref, str) or not ref:
            raise ApprovalRefused(f"{REQUEST}: a GitHub decision names user and forgeRef", 400)
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ApprovalRefused(f"{REQUEST}: groups must be a list of strings", 400)
        forge = {
            "forge_user": str(data["forgeUser"])[:128],
            "user": user[:512],
            "groups": tuple(groups[:32]),
            "forge_ref": ref[:256],
        }
    return ApprovalRequest(decision=decision, reason=reason, spec_digest=pinned, **forge)


def check_records_untouched(old: dict[str, str] | None, new: dict[str, str] | None) -> None:
    """Refuse any change to the records other than the webhook's own."""
    if (old or {}).get(RECORDS) != (new or {}).get(RECORDS):
        raise ApprovalRefused(
            f"{RECORDS} is written only by the operator's admission webhook; "
            "use `lattice approve` or `lattice reject`",
            403,
        )


def record_for(
    request: ApprovalRequest,
    userinfo: dict[str, Any],
    previous: list[ApprovalRecord],
    now: datetime,
    digest: str,
    operator: str | None = None,
) -> list[ApprovalRecord]:
    """The records after this request, stamped with the authenticated identity (for a
    decision made on GitHub: the mapped Kubernetes user, relayed only by the operator
    itself, `operator`) and the digest of the spec it decides on."""
    user = str(userinfo.get("username") or "")
    if not user:
        raise ApprovalRefused("the request carries no authenticated user", 403)
    if request.forge_user is not None:
        if operator is None or user != operator:
            raise ApprovalRefused(
                f"{user} may not relay a decision made on GitHub: only the operator does", 403
            )
        if any(r.forge_ref == request.forge_ref for r in previous):
            return list(previous)  # the same comment again (a redelivery): already recorded
        user = request.user or ""
        userinfo = {"username": user}
    if request.spec_digest is not None and request.spec_digest != digest:
        raise ApprovalRefused(
            f"the Intent's spec changed since it was shown to you (you reviewed "
            f"{request.spec_digest[:19]}…, it is now {digest[:19]}…): review it again",
            409,
        )
    if len(previous) >= MAX_RECORDS:
        raise ApprovalRefused(f"an Intent keeps at most {MAX_RECORDS} approval records", 409)
    record = ApprovalRecord(
        user=user,
        uid=userinfo.get("uid") or None,
        decision=request.decision,
        reason=request.reason,
        time=now,
        spec_digest=digest,
        forge_user=request.forge_user,
        forge_ref=request.forge_ref,
    )
    return [*previous, record]


def records_json(records: list[ApprovalRecord]) -> str:
    return json.dumps([r.to_wire() for r in records], separators=(",", ":"))


def access_review(userinfo: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """The SubjectAccessReview asking whether this user may approve this Intent."""
    attributes = {"verb": "approve", "group": "lattice.dev", "resource": "intents"}
    return subject_access_review(userinfo, {"namespace": namespace, "name": name, **attributes})


def subject_access_review(
    userinfo: dict[str, Any], resource_attributes: dict[str, str]
) -> dict[str, Any]:
    """A SubjectAccessReview for the identity the API server authenticated."""
    spec: dict[str, Any] = {
        "user": userinfo.get("username", ""),
        "groups": list(userinfo.get("groups") or []),
        "resourceAttributes": resource_attributes,
    }
    if userinfo.get("uid"):
        spec["uid"] = userinfo["uid"]
    if userinfo.get("extra"):
        spec["extra"] = userinfo["extra"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
