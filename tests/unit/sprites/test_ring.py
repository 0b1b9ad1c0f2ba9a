"""The bounded scrollback replayed on attach."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lattice_devtools.sprites_local import OutputRing


def test_keeps_the_last_bytes_with_their_streams() -> None:
    ring = OutputRing(10)
    ring.append(1, b"abcdef")
    ring.append(2, b"ghij")
    ring.append(1, b"kl")
    assert ring.snapshot() == [(1, b"cdef"), (2, b"ghij"), (1, b"kl")]
    assert len(ring) == 10


def test_a_chunk_bigger_than_the_ring_keeps_its_tail() -> None:
    ring = OutputRing(4)
    ring.append(1, b"x")
    ring.append(2, b"0123456789")
    assert ring.snapshot() == [(2, b"6789")]


def test_zero_capacity_keeps_nothing() -> None:
    ring = OutputRing(0)
    ring.append(1, b"data")
    assert ring.snapshot() == []


@given(
    st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=50)), max_size=40),
    st.integers(min_value=1, max_value=100),
)
def test_snapshot_is_the_suffix_of_everything_written(
    chunks: list[tuple[int, bytes]], capacity: int
) -> None:
    ring = OutputRing(capacity)
    for stream, data in chunks:
        ring.append(stream, data)
    everything = b"".join(data for _, data in chunks)
    kept = b"".join(data for _, data in ring.snapshot())
    assert kept == everything[-capacity:] if everything else kept == b""
    assert len(kept) <= capacity
