"""How much of a text or list the Intent pipeline keeps in an Intent's status.

Each value is the bound the Intent's schema (api/v1alpha1/intent.py) puts on the field it
fills: the API server refuses a longer value, so the pipeline cuts it first (and a pass
never fails on someone's long message, URL or artifact list).
"""

from __future__ import annotations

MESSAGE_CHARS = 1024
"""A condition's message and an audit entry's reason (AuditEntry.reason)."""
ACTOR_CHARS = 512
"""An audit entry's actor (AuditEntry.actor): the approvers' names, joined."""
SUMMARY_CHARS = 1024
"""The result's summary (IntentResult.summary)."""
ARTIFACTS_KEPT = 32
"""The result's artifacts (IntentResult.artifacts): the first ones are kept."""
ARTIFACT_CHARS = 1024
"""One artifact line (`kind: url or ref`), each item of IntentResult.artifacts."""
URL_CHARS = 1024
"""The pull request's web address (ForgePullRequestRef.url)."""
AUDIT_KEPT = 64
"""Audit entries (IntentStatus.auditLog): the newest are kept."""

__all__ = [
    "ACTOR_CHARS",
    "ARTIFACTS_KEPT",
    "ARTIFACT_CHARS",
    "AUDIT_KEPT",
    "MESSAGE_CHARS",
    "SUMMARY_CHARS",
    "URL_CHARS",
]
