"""Line assembly: stdout frames cut anywhere, outbox bytes read from an offset."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lattice_operator.protocol.outbox import read_lines
from lattice_operator.protocol.splitter import StdoutSplitter

PREFIX = b"LATTICE_EVENT "


def split_all(stream: bytes, cuts: list[int], max_line_bytes: int = 1 << 16) -> list[bytes]:
    splitter = StdoutSplitter(max_line_bytes=max_line_bytes)
    bodies: list[bytes] = []
    start = 0
    for cut in [*sorted(cuts), len(stream)]:
        bodies += [body for _, _, body, _ in splitter.feed(stream[start:cut])]
        start = cut
    return bodies + [body for _, _, body, _ in splitter.flush()]


def test_an_event_split_across_frames_is_kept() -> None:
    stream = PREFIX + b'{"a":1}\n'
    assert split_all(stream, [3, 15, 18]) == [b'{"a":1}']


def test_crlf_and_surrounding_whitespace_are_removed() -> None:
    stream = PREFIX + b'{"a":1}\r\n' + PREFIX + b'  {"b":2}  \r\n'
    assert split_all(stream, []) == [b'{"a":1}', b'{"b":2}']


def test_ordinary_output_goes_to_a_bounded_tail() -> None:
    splitter = StdoutSplitter(max_line_bytes=1024, log_lines=3, log_line_chars=20)
    data = b"".join(f"line {i}\r\n".encode() for i in range(10)) + PREFIX + b"{}\n"
    events = splitter.feed(data)
    assert [body for _, _, body, _ in events] == [b"{}"]
    assert splitter.log_tail() == ["line 7", "line 8", "line 9"]
    splitter.feed(b"progress 10%\rprogress 90%\r\n" + b"x" * 100 + b"\n")
    assert splitter.log_tail()[-2:] == ["progress 90%", "x" * 19 + "…"]


def test_the_prefix_must_start_the_line() -> None:
    assert split_all(b"echo " + PREFIX + b"{}\n" + PREFIX + b"{}\n", []) == [b"{}"]


def test_line_numbers_and_offsets() -> None:
    splitter = StdoutSplitter(max_line_bytes=1024)
    events = splitter.feed(b"hello\n" + PREFIX + b"{}\n" + b"x\n" + PREFIX + b"[]")
    events += splitter.flush()
    assert [(line, offset) for line, offset, _, _ in events] == [(1, 6), (3, 25)]


def test_a_line_over_the_cap_is_not_buffered() -> None:
    splitter = StdoutSplitter(max_line_bytes=1024)
    assert splitter.feed(PREFIX + b"{" + b"x" * 600) == []
    events = splitter.feed(b"y" * 600)  # now over the cap: reported at once
    assert len(events) == 1
    assert events[0][3] is True
    assert splitter.partial_bytes == 0
    for _ in range(100):  # the rest of the line streams past without being kept
        assert splitter.feed(b"z" * 4096) == []
        assert splitter.partial_bytes == 0
    events = splitter.feed(b"}\n" + PREFIX + b"{}\n")
    assert [(body, long) for _, _, body, long in events] == [(b"{}", False)]


def test_a_complete_line_over_the_cap_is_reported_too_long() -> None:
    splitter = StdoutSplitter(max_line_bytes=1024)
    events = splitter.feed(PREFIX + b"x" * 2000 + b"\n" + PREFIX + b"{}\n")
    assert [long for _, _, _, long in events] == [True, False]


def test_reset_drops_the_partial_line_of_the_old_connection() -> None:
    splitter = StdoutSplitter(max_line_bytes=1024)
    splitter.feed(PREFIX + b'{"half":')
    splitter.reset()
    assert splitter.feed(b"1}\n" + PREFIX + b"{}\n") != []
    assert [body for _, _, body, _ in splitter.feed(PREFIX + b"[]\n")] == [b"[]"]


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.tuples(st.booleans(), st.binary(max_size=40).filter(lambda b: b"\n" not in b)),
        max_size=20,
    ),
    cuts=st.lists(st.integers(0, 2000), max_size=30),
    crlf=st.booleans(),
)
def test_any_frame_cutting_gives_the_same_lines(
    lines: list[tuple[bool, bytes]], cuts: list[int], crlf: bool
) -> None:
    end = b"\r\n" if crlf else b"\n"
    stream = b"".join((PREFIX if is_event else b"log ") + body + end for is_event, body in lines)
    expected = [
        (PREFIX + body).removeprefix(PREFIX).strip() for is_event, body in lines if is_event
    ]
    cuts = [c for c in cuts if c <= len(stream)]
    assert split_all(stream, cuts) == expected


# -- outbox -------------------------------------------------------------------------------------


def test_complete_lines_and_the_next_offset() -> None:
    data = b'{"a":1}\n{"b":2}\n{"c":'
    read = read_lines(data, 100, max_line_bytes=1024)
    assert [(offset, raw) for offset, raw, _ in read.lines] == [
        (100, b'{"a":1}'),
        (108, b'{"b":2}'),
    ]
    assert read.offset == 116  # the unfinished line is left for next time
    assert not read.skipping


def test_final_takes_the_unfinished_last_line() -> None:
    read = read_lines(b'{"a":1}\n{"c":3}', 0, max_line_bytes=1024, final=True)
    assert [raw for _, raw, _ in read.lines] == [b'{"a":1}', b'{"c":3}']
    assert read.offset == 15


def test_blank_lines_and_crlf() -> None:
    read = read_lines(b'\n{"a":1}\r\n  \n{"b":2}\n', 0, max_line_bytes=1024)
    assert [(offset, raw) for offset, raw, _ in read.lines] == [(1, b'{"a":1}'), (13, b'{"b":2}')]


def test_an_unfinished_line_over_the_cap_is_skipped_across_reads() -> None:
    first = read_lines(b'{"a":1}\n' + b"x" * 2000, 0, max_line_bytes=1024)
    assert [long for _, _, long in first.lines] == [False, True]
    assert first.skipping
    assert first.offset == 2008
    middle = read_lines(b"y" * 5000, first.offset, max_line_bytes=1024, skipping=True)
    assert middle.lines == []
    assert middle.skipping
    assert middle.offset == 7008
    last = read_lines(b'yy\n{"b":2}\n', middle.offset, max_line_bytes=1024, skipping=True)
    assert [(offset, raw) for offset, raw, _ in last.lines] == [(7011, b'{"b":2}')]
    assert not last.skipping


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.binary(min_size=1, max_size=30).filter(
            lambda b: b"\n" not in b.strip() and b.strip() != b"" and b"\n" not in b
        ),
        max_size=20,
    ),
    reads=st.lists(st.integers(0, 800), max_size=10),
)
def test_reading_in_any_pieces_gives_every_line_once(lines: list[bytes], reads: list[int]) -> None:
    data = b"".join(item + b"\n" for item in lines)
    got: list[tuple[int, bytes]] = []
    offset = 0
    for end in sorted(r for r in reads if r <= len(data)):
        if end < offset:
            continue
        read = read_lines(data[offset:end], offset, max_line_bytes=1024)
        got += [(o, raw) for o, raw, _ in read.lines]
        offset = read.offset
    read = read_lines(data[offset:], offset, max_line_bytes=1024, final=True)
    got += [(o, raw) for o, raw, _ in read.lines]
    starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines))]
    assert got == [(s, item.strip()) for s, item in zip(starts, lines, strict=True)]
