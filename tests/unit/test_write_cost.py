"""The capacity bench's write anatomy (tests/support/write_cost.py): its pure parts."""

from __future__ import annotations

import pytest

from lattice_operator.lifeloop.ledger import IDEMPOTENCY_MEMORY
from tests.support.write_cost import SYNTHETIC_KB, fit, full_ledger, size, synthetic


def test_the_fit_finds_the_line_through_the_points() -> None:
    base, per_kb = fit([(0.5, 3.0), (1, 3.5), (2, 4.5), (4, 6.5)])
    assert base == pytest.approx(2.5)
    assert per_kb == pytest.approx(1.0)


@pytest.mark.parametrize("kb", SYNTHETIC_KB)
def test_a_synthetic_status_is_about_the_size_asked(kb: float) -> None:
    assert size(synthetic(kb)) == pytest.approx(kb * 1024, rel=0.1)


def test_a_full_ledger_holds_as_many_distinct_records_as_the_ledger_keeps() -> None:
    record = {"key": "idem-0123456789abcdef", "sequence": 4, "receiptId": "lfr-x"}
    status = {"phase": "Succeeded", "receipts": {"state": {"ledger": {"idempotency": [record]}}}}
    full = full_ledger(status)
    records = full["receipts"]["state"]["ledger"]["idempotency"]
    assert len(records) == IDEMPOTENCY_MEMORY
    assert len({r["key"] for r in records}) == IDEMPOTENCY_MEMORY
    assert all(len(r["key"]) == len(record["key"]) for r in records)
    assert status["receipts"]["state"]["ledger"]["idempotency"] == [record]  # not changed
