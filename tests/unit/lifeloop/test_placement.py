"""Payload placement: success, degradation (a fallback placement, said in the receipt) and
refusal, for the context and the resume payload."""

from __future__ import annotations

from lattice_operator.lifeloop import FailureClass, PayloadPlacement, ReceiptStatus
from lattice_operator.lifeloop.negotiation import Requirement
from lattice_operator.lifeloop.placement import Payload, PlacementRequest, place
from lattice_operator.lifeloop.registry import ARGV_MAX_BYTES, REGISTRY

P = PayloadPlacement
R = Requirement
CLAUDE = REGISTRY["claude"]
CODEX = REGISTRY["codex"]
CLAUDE_ARGV = ("claude", "-p", "fix the bug")


def payload(*placements: tuple[PayloadPlacement, Requirement], body: str = "ctx") -> Payload:
    return Payload(
        payload_id="context-s1",
        payload_kind="context",
        body=body,
        acceptable_placements=tuple(PlacementRequest(p, r) for p, r in placements),
        file_path="/workspace/.lattice/context",
        env_name="LATTICE_CONTEXT_FILE",
    )


def test_success_first_placement_delivered() -> None:
    decision = place(
        CLAUDE.manifest,
        CLAUDE.routes,
        payload((P.DEVELOPER_EQUIVALENT_FRAME, R.REQUIRED)),
        CLAUDE_ARGV,
    )
    assert decision.placement is P.DEVELOPER_EQUIVALENT_FRAME
    assert decision.receipt.status is ReceiptStatus.DELIVERED
    assert decision.delivery.argv == (
        "claude",
        "--append-system-prompt",
        "ctx",
        "-p",
        "fix the bug",
    )
    assert decision.warnings == ()
    assert decision.receipt.byte_size == 3
    assert decision.receipt.content_digest is not None
    assert "ctx" not in decision.receipt.model_dump_json()  # never the body


def test_prompt_prefix_puts_the_payload_before_the_prompt() -> None:
    decision = place(
        CODEX.manifest,
        CODEX.routes,
        payload((P.PRE_PROMPT_FRAME, R.REQUIRED)),
        ("/usr/local/bin/codex", "exec", "fix the bug"),
    )
    assert decision.delivery.argv == ("/usr/local/bin/codex", "exec", "ctx\n\nfix the bug")


def test_degradation_falls_back_and_says_why() -> None:
    decision = place(
        CLAUDE.manifest,
        CLAUDE.routes,
        payload((P.DEVELOPER_EQUIVALENT_FRAME, R.PREFERRED), (P.SIDE_CHANNEL_CONTEXT, R.REQUIRED)),
        ("sh", "-c", "claude -p hi"),
    )
    assert decision.placement is P.SIDE_CHANNEL_CONTEXT
    assert decision.receipt.status is ReceiptStatus.DEGRADED
    assert decision.delivery.files == {"/workspace/.lattice/context": b"ctx"}
    assert decision.delivery.env == {"LATTICE_CONTEXT_FILE": "/workspace/.lattice/context"}
    assert decision.delivery.argv == ("sh", "-c", "claude -p hi")
    (warning,) = decision.warnings
    assert "developer_equivalent_frame" in warning
    assert "does not run claude directly" in warning


def test_an_optional_placement_skipped_is_no_degradation() -> None:
    decision = place(
        CODEX.manifest,
        CODEX.routes,
        payload((P.DEVELOPER_EQUIVALENT_FRAME, R.OPTIONAL), (P.SIDE_CHANNEL_CONTEXT, R.REQUIRED)),
        ("codex", "exec", "x"),
    )
    assert (decision.placement, decision.receipt.status) == (
        P.SIDE_CHANNEL_CONTEXT,
        ReceiptStatus.DELIVERED,
    )


def test_refusal_when_a_required_placement_is_unavailable() -> None:
    decision = place(
        CODEX.manifest,
        CODEX.routes,
        payload((P.DEVELOPER_EQUIVALENT_FRAME, R.REQUIRED)),
        ("codex", "exec", "x"),
    )
    assert decision.placement is None
    assert decision.failure_class is FailureClass.PLACEMENT_UNAVAILABLE
    assert decision.receipt.status is ReceiptStatus.FAILED
    assert "no route" in decision.message
    assert decision.delivery.argv == ("codex", "exec", "x")  # nothing delivered


def test_refusal_for_size_is_payload_too_large() -> None:
    decision = place(
        CLAUDE.manifest,
        CLAUDE.routes,
        payload((P.PRE_PROMPT_FRAME, R.REQUIRED), body="x" * (ARGV_MAX_BYTES + 1)),
        CLAUDE_ARGV,
    )
    assert decision.failure_class is FailureClass.PAYLOAD_TOO_LARGE
    assert "exceed" in decision.message


def test_only_preferred_unavailable_skips_the_payload_degraded() -> None:
    decision = place(
        CODEX.manifest,
        CODEX.routes,
        payload((P.DEVELOPER_EQUIVALENT_FRAME, R.PREFERRED)),
        ("codex", "exec", "x"),
    )
    assert decision.failure_class is None
    assert decision.placement is None
    assert decision.receipt.status is ReceiptStatus.DEGRADED
    assert decision.warnings


def test_only_optional_unavailable_skips_quietly() -> None:
    decision = place(
        CODEX.manifest,
        CODEX.routes,
        payload((P.DEVELOPER_EQUIVALENT_FRAME, R.OPTIONAL)),
        ("codex", "exec", "x"),
    )
    assert decision.receipt.status is ReceiptStatus.SKIPPED
    assert decision.warnings == ()


def test_receipt_only_records_and_delivers_nothing() -> None:
    decision = place(
        CODEX.manifest, CODEX.routes, payload((P.RECEIPT_ONLY, R.REQUIRED)), ("codex", "exec", "x")
    )
    assert decision.placement is P.RECEIPT_ONLY
    assert decision.receipt.status is ReceiptStatus.DELIVERED
    assert (decision.delivery.argv, dict(decision.delivery.env), dict(decision.delivery.files)) == (
        ("codex", "exec", "x"),
        {},
        {},
    )


def test_a_prompt_route_needs_a_prompt() -> None:
    decision = place(
        CLAUDE.manifest,
        CLAUDE.routes,
        payload((P.PRE_PROMPT_FRAME, R.PREFERRED), (P.RECEIPT_ONLY, R.OPTIONAL)),
        ("claude", "--continue"),
    )
    assert decision.placement is P.RECEIPT_ONLY
    assert "no prompt" in decision.warnings[0]


def test_the_sprites_adapter_places_nothing() -> None:
    sprites = REGISTRY["sprites"]
    decision = place(
        sprites.manifest,
        sprites.routes,
        payload((P.SIDE_CHANNEL_CONTEXT, R.REQUIRED)),
        ("sh", "-c", "true"),
    )
    assert decision.failure_class is FailureClass.PLACEMENT_UNAVAILABLE
