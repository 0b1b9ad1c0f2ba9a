"""Classification and gate rules (CEL over the Intent)."""

from lattice_operator.policy.cel import PolicyInvalid, RuleError
from lattice_operator.policy.classify import (
    DEFAULT_DECISION,
    CompiledPolicy,
    Decision,
    classify,
    compile_policy,
)
from lattice_operator.policy.document import intent_document

__all__ = [
    "DEFAULT_DECISION",
    "CompiledPolicy",
    "Decision",
    "PolicyInvalid",
    "RuleError",
    "classify",
    "compile_policy",
    "intent_document",
]
