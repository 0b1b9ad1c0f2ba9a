"""The reasons of an Intent's conditions, as one closed enumeration.

The phase is derived from the conditions' status and reason (`derive_phase`): a misspelt
reason would silently change a phase (say, Waiting into Executing), so every reason the
pipeline writes is a member.
"""

from __future__ import annotations

from enum import StrEnum


class IntentReason(StrEnum):
    # Classified
    POLICY_RULE = "PolicyRule"
    POLICY_RULE_ERROR = "PolicyRuleError"
    NO_RULE_MATCHED = "NoRuleMatched"
    # Approved
    AUTO_APPROVED = "AutoApproved"
    APPROVED = "Approved"
    AWAITING_APPROVAL = "AwaitingApproval"
    DENIED = "Denied"
    REJECTED = "Rejected"
    # Succeeded, on the way (Unknown): Executing or one of the waiting reasons
    EXECUTING = "Executing"
    WAITING = "Waiting"
    NO_FORGE_CONFIGURED = "NoForgeConfigured"
    FILEOPS_NOT_ENABLED = "FileOpsNotEnabled"
    SPRITE_NOT_READY = "SpriteNotReady"
    NOT_SUPPORTED = "NotSupported"
    NO_AGENT_CONFIGURED = "NoAgentConfigured"
    FORGE_UNAVAILABLE = "ForgeUnavailable"
    NO_FLY_CONFIGURED = "NoFlyConfigured"
    # Succeeded, at the end
    COMPLETED = "Completed"
    SPRITE_READY = "SpriteReady"
    RUN_FAILED = "RunFailed"
    RUN_NAME_TAKEN = "RunNameTaken"
    SPRITE_FAILED = "SpriteFailed"
    FILEOPS_FAILED = "FileOpsFailed"
    FILEOPS_NO_SPRITE = "FileOpsNoSprite"
    CANCELED = "Canceled"
    FORGE_FAILED = "ForgeFailed"
    BRANCH_REFUSED = "BranchRefused"
    REMEDIATED = "Remediated"
    REMEDIATION_FAILED = "RemediationFailed"
    FLY_FAILED = "FlyFailed"
    SPRITE_HELD = "SpriteHeld"
    RESTORED = "Restored"
    RESTORE_FAILED = "RestoreFailed"
    GLOBAL_CANDIDATE = "GlobalCandidate"
    """environment_change of scope global_candidate: recorded for a human to promote."""
    ESCALATED_TO_HUMAN = "EscalatedToHuman"
    """environment_change escalate_to_human: a notice, nothing applied."""
    INVALID_SPEC = "InvalidSpec"
    """A kind this operator does not know, or its params missing: admission refuses both,
    so only an object that got past it (an older CRD, a direct etcd write) ends so."""


WAITING_REASONS = frozenset(
    {
        IntentReason.WAITING,
        IntentReason.NO_FORGE_CONFIGURED,
        IntentReason.FILEOPS_NOT_ENABLED,
        IntentReason.SPRITE_NOT_READY,
        IntentReason.NOT_SUPPORTED,
        IntentReason.NO_AGENT_CONFIGURED,
        IntentReason.FORGE_UNAVAILABLE,
        IntentReason.NO_FLY_CONFIGURED,
    }
)
"""Succeeded=Unknown with these reasons is the Waiting phase (never silently Executing)."""

__all__ = ["WAITING_REASONS", "IntentReason"]
