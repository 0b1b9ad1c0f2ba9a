"""Classification and gate rules (CEL over the Intent)."""

from lattice_operator.policy.classify import (
    DEFAULT_DECISION,
    CompiledPolicy,
    Decision,
    classify,
    classify_off_loop,
    compile_policy,
    compile_policy_off_loop,
)
from lattice_operator.policy.document import intent_document
from lattice_operator.policy.rules import PolicyInvalid, RuleError

__all__ = [
    "DEFAULT_DECISION",
    "CompiledPolicy",
    "Decision",
    "PolicyInvalid",
    "RuleError",
    "classify",
    "classify_off_loop",
    "compile_policy",
    "compile_policy_off_loop",
    "intent_document",
]
