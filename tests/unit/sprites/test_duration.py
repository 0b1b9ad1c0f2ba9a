"""Go-style durations as the Sprites API sends and accepts them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

# A helper private to the adapters (the Sprites adapter and the local server share it).
from lattice_adapters._duration import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("10s", 10),
        ("5m", 300),
        ("24h", 86400),
        ("1h30m", 5400),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("10", 10),
        ("2.5", 2.5),
        ("1m0.5s", 60.5),
    ],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "-1s", "ten", "10x", "s", "1h-5m", "nan"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0"), (10, "10s"), (1.5, "1500ms"), (0.25, "250ms")]
)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**7).map(lambda ms: ms / 1000))
def test_round_trip(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, abs=1e-3)
