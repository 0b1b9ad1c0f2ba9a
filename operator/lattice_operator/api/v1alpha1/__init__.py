"""lattice.dev/v1alpha1: Sprite, Run, Intent."""

from lattice_operator.api.v1alpha1._base import (
    ApiModel,
    LocalObjectReference,
    ObjectMeta,
    OwnerReference,
    SecretKeyReference,
)
from lattice_operator.api.v1alpha1.conditions import Condition, find_condition, set_condition
from lattice_operator.api.v1alpha1.fileops import FileOp, FileOpsRequest
from lattice_operator.api.v1alpha1.intent import (
    INTENT_KINDS,
    AuditEntry,
    Classification,
    CredentialGrant,
    Intent,
    IntentParams,
    IntentPhase,
    IntentSpec,
    IntentStatus,
    params_field,
)
from lattice_operator.api.v1alpha1.run import (
    TERMINAL_RUN_PHASES,
    ActionResult,
    EnvVar,
    ResumeStatus,
    Run,
    RunAttempt,
    RunPhase,
    RunReceiptsStatus,
    RunResume,
    RunSpec,
    RunStatus,
    RunTemplate,
)
from lattice_operator.api.v1alpha1.sprite import (
    NetworkPolicy,
    NetworkRule,
    Sprite,
    SpriteService,
    SpriteSpec,
    SpriteStatus,
)

VERSION = "v1alpha1"
API_VERSION = "lattice.dev/v1alpha1"

__all__ = [
    "API_VERSION",
    "INTENT_KINDS",
    "TERMINAL_RUN_PHASES",
    "VERSION",
    "ActionResult",
    "ApiModel",
    "AuditEntry",
    "Classification",
    "Condition",
    "CredentialGrant",
    "EnvVar",
    "FileOp",
    "FileOpsRequest",
    "Intent",
    "IntentParams",
    "IntentPhase",
    "IntentSpec",
    "IntentStatus",
    "LocalObjectReference",
    "NetworkPolicy",
    "NetworkRule",
    "ObjectMeta",
    "OwnerReference",
    "ResumeStatus",
    "Run",
    "RunAttempt",
    "RunPhase",
    "RunReceiptsStatus",
    "RunResume",
    "RunSpec",
    "RunStatus",
    "RunTemplate",
    "SecretKeyReference",
    "Sprite",
    "SpriteService",
    "SpriteSpec",
    "SpriteStatus",
    "find_condition",
    "params_field",
    "set_condition",
]
