"""`lattice events replay`: run the event engine offline over a captured stdout and/or outbox."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, Generic, TypeVar

import typer

if TYPE_CHECKING:
    from lattice_operator.lifeloop import LifecycleReceipt
    from lattice_operator.protocol import RunEventEngine, RunEventsStatus, Violation

app = typer.Typer(
    name="events",
    help="Tools for sprite event streams (the LATTICE_EVENT protocol).",
    no_args_is_help=True,
)

_OUTBOX_READ = 64 * 1024  # read the outbox file in pieces, as the operator does
# With both inputs, stdout is read until this many of its copies wait for the outbox, then
# the outbox until they are matched: both files stream, and memory stays bounded whatever
# their sizes (the engine forgets committed lines after its committed window).
_STDOUT_AHEAD = 1024


@app.command("replay")
def replay(
    sprite_id: Annotated[str, typer.Option("--sprite-id", help="The sprite id events must carry.")],
    work_item: Annotated[
        str, typer.Option("--work-item", help="The work item id events must carry.")
    ],
    stdout: Annotated[
        Path | None,
        typer.Option(
            "--stdout", exists=True, dir_okay=False, help="Captured stdout of the session."
        ),
    ] = None,
    outbox: Annotated[
        list[Path] | None,
        typer.Option(
            "--outbox",
            exists=True,
            dir_okay=False,
            help="The session's outbox.jsonl (canonical when given). Repeat it for a resumed "
            "Run: one copy per session, each as the session left it.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    exit_code: Annotated[
        int | None, typer.Option(help="The session's exit code, if known.")
    ] = None,
    frame_bytes: Annotated[
        int, typer.Option(min=1, help="Feed stdout in frames of this many bytes.")
    ] = 4096,
    strict: Annotated[
        bool, typer.Option(help="Exit with status 1 when there is any protocol violation.")
    ] = False,
) -> None:
    """Replay a captured stdout and/or outbox: Run status, violations and Lifeloop receipts.

    With --outbox the outbox is canonical and stdout is only matched against it
    (stdout events missing from the outbox are reported); with --stdout alone,
    stdout events are taken as they are.
    """
    import json

    from lattice_operator.clock import SystemClock
    from lattice_operator.lifeloop import RunReceipts, RunTransition
    from lattice_operator.protocol import EngineLimits, RunEventEngine

    if stdout is None and not outbox:
        raise typer.BadParameter("give --stdout, --outbox or both")
    if stdout is not None and outbox and len(outbox) > 1:
        raise typer.BadParameter("--stdout goes with a single session's --outbox")
    engine = RunEventEngine(
        sprite_id,
        work_item,
        canonical="outbox" if outbox else "stdout",
        # stdout is kept at most _STDOUT_AHEAD copies ahead of the outbox (see _STDOUT_AHEAD).
        limits=EngineLimits(max_provisional=4 * _STDOUT_AHEAD, max_provisional_bytes=64 << 20),
    )
    receipts = RunReceipts(
        run_key=f"replay/{work_item}", work_item_id=work_item, clock=SystemClock()
    )
    receipts.set_session("replay")
    with contextlib.ExitStack() as files:
        # Everything a replay reports is spooled (memory first, then a temporary file),
        # with the last few kept for the tables: a long replay holds neither list.
        produced: _Spool[LifecycleReceipt] = files.enter_context(_Spool(_receipt_json))
        violations: _Spool[Violation] = files.enter_context(_Spool(_violation_json))
        produced.extend(receipts.for_transition(RunTransition.EXEC_STARTING, key="replay"))
        produced.extend(receipts.for_transition(RunTransition.EXEC_STARTED, key="replay"))

        def take(result: Any) -> None:
            violations.extend(result.violations)
            for event in result.committed:
                produced.extend(receipts.for_event(event))

        frames = _frames(files.enter_context(stdout.open("rb")), frame_bytes) if stdout else None
        previous: Path | None = None
        for session_file in outbox or []:
            start = 0
            if previous is not None:
                # A resume restored the checkpoint: the file restarts from the part both
                # copies share (up to a line end), and the new session appends after it.
                take(engine.end_session(None))
                start = _shared_prefix(previous, session_file)
                waiting = engine.status().waiting
                if waiting is None:
                    raise typer.BadParameter(
                        f"{session_file}: the previous session did not end with WAITING",
                        param_hint="--outbox",
                    )
                # The WAITING session is over (session.ended), as the operator records it.
                produced.extend(
                    receipts.for_transition(
                        RunTransition.EXEC_EXITED, key=f"waiting:{start}", exit_code=exit_code
                    )
                )
                engine.resumed(waiting.checkpoint_id, outbox_size=start)
                produced.extend(
                    receipts.for_transition(RunTransition.RESUME_STARTING, key=str(start))
                )
                produced.extend(
                    receipts.for_transition(RunTransition.RESUME_STARTED, key=str(start))
                )
            reader = _OutboxReader(engine, files.enter_context(session_file.open("rb")), start)
            if frames is not None:
                _interleave(engine, frames, reader, take)
            reader.read_to_end(take)
            previous = session_file
        if frames is not None and not outbox:
            for frame in frames:
                take(engine.feed_stdout(frame))
        take(engine.end_session(exit_code))
        announced = engine.cursor.terminal_in_session
        produced.extend(
            receipts.for_transition(
                RunTransition.EXEC_EXITED if announced else RunTransition.EXEC_EXITED_UNANNOUNCED,
                key="replay",
                exit_code=exit_code,
            )
        )

        status = engine.status()
        if as_json:
            # One JSON document, written piece by piece from the spools.
            def dump(value: Any) -> str:
                return json.dumps(value, indent=2, ensure_ascii=False)

            typer.echo(
                "{\n"
                f'"status": {dump(status.model_dump(mode="json", by_alias=True))},\n'
                f'"cursor": {dump(engine.cursor.model_dump(mode="json", by_alias=True))},\n'
                '"violations": ',
                nl=False,
            )
            violations.write_array(typer.echo)
            typer.echo(',\n"receipts": ', nl=False)
            produced.write_array(typer.echo)
            typer.echo(f',\n"logTail": {dump(engine.log_tail())}\n}}')
        else:
            _print_tables(engine, status, violations, produced)
        if strict and violations.count:
            raise typer.Exit(1)


T = TypeVar("T")


def _receipt_json(receipt: LifecycleReceipt) -> Any:
    return receipt.to_wire()


def _violation_json(violation: Violation) -> Any:
    return violation.model_dump(mode="json", by_alias=True)


class _Spool(Generic[T]):
    """Items as JSON lines in a spooled temporary file (memory up to 1 MiB, then disk), with
    the count and the last `TAIL` items kept for tables."""

    TAIL = 200

    def __init__(self, to_json: Callable[[T], Any]) -> None:
        import json
        import tempfile
        from collections import deque

        self._dumps = json.dumps
        self._to_json = to_json
        self._file = tempfile.SpooledTemporaryFile(max_size=1 << 20, mode="w+b")  # noqa: SIM115 - closed by __exit__
        self.count = 0
        self.tail: deque[T] = deque(maxlen=self.TAIL)

    def __enter__(self) -> _Spool[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            line = self._dumps(self._to_json(item), ensure_ascii=False) + "\n"
            self._file.write(line.encode())
            self.count += 1
            self.tail.append(item)

    def write_array(self, echo: Callable[..., Any]) -> None:
        self._file.seek(0)
        echo("[", nl=False)
        for index, line in enumerate(self._file):
            echo(("\n" if index == 0 else ",\n") + line.decode().rstrip("\n"), nl=False)
        echo("\n]" if self.count else "]", nl=False)


def _frames(file: BinaryIO, size: int) -> Iterator[bytes]:
    while frame := file.read(size):
        yield frame


class _OutboxReader:
    """One outbox file fed to the engine in reads of the operator's size, from an offset."""

    def __init__(self, engine: RunEventEngine, file: BinaryIO, offset: int) -> None:
        self._engine = engine
        self._file = file
        self._offset = offset
        self._size = _OUTBOX_READ
        self.done = False

    def read_once(self, take: Callable[[Any], None]) -> None:
        self._file.seek(self._offset)
        data = self._file.read(self._size)
        final = len(data) < self._size or not self._file.read(1)
        take(self._engine.feed_outbox(data, self._offset, final=final))
        if final:
            self.done = True
            return
        # Read on from the cursor; a line longer than one read needs a larger one.
        moved = self._engine.cursor.outbox_offset
        self._size = self._size * 2 if moved == self._offset else _OUTBOX_READ
        self._offset = moved

    def read_to_end(self, take: Callable[[Any], None]) -> None:
        while not self.done:
            self.read_once(take)


def _interleave(
    engine: RunEventEngine,
    frames: Iterator[bytes],
    reader: _OutboxReader,
    take: Callable[[Any], None],
) -> None:
    """stdout until it is _STDOUT_AHEAD copies ahead, then the outbox until they are matched."""
    for frame in frames:
        take(engine.feed_stdout(frame))
        if engine.provisional_count >= _STDOUT_AHEAD:
            while not reader.done and engine.provisional_count > _STDOUT_AHEAD // 2:
                reader.read_once(take)


def _shared_prefix(first: Path, second: Path) -> int:
    """Length of the longest common prefix of two outbox copies, ending at a line end,
    compared in pieces (neither file is read whole)."""
    n = 0
    last_newline = -1
    with first.open("rb") as a, second.open("rb") as b:
        while True:
            x, y = a.read(_OUTBOX_READ), b.read(_OUTBOX_READ)
            limit = min(len(x), len(y))
            common = limit if x[:limit] == y[:limit] else 0
            while common < limit and x[common] == y[common]:
                common += 1
            newline = x.rfind(b"\n", 0, common)
            if newline >= 0:
                last_newline = n + newline
            n += common
            if common < _OUTBOX_READ or len(x) != len(y):
                return last_newline + 1


def _print_tables(
    engine: RunEventEngine,
    status: RunEventsStatus,
    violations: _Spool[Violation],
    produced: _Spool[LifecycleReceipt],
) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False)
    summary = Table(title="Run status", show_header=False, title_justify="left")
    summary.add_column("field", style="bold")
    summary.add_column("value")
    cursor = engine.cursor
    summary.add_row("state", f"{status.state} (session {status.session})")
    summary.add_row("events", f"{status.event_count} committed of {cursor.line_count} lines")
    summary.add_row("current phase", status.current_phase or "-")
    if status.progress is not None:
        percent = "-" if status.progress.percent is None else f"{status.progress.percent:g}%"
        summary.add_row("progress", f"{percent} {status.progress.message}")
    if status.waiting is not None:
        summary.add_row(
            "waiting", f"{status.waiting.reason} (checkpoint {status.waiting.checkpoint_id})"
        )
    if status.completion is not None:
        summary.add_row("completion", f"{status.completion.status}: {status.completion.summary}")
    counts = status.counts.model_dump(by_alias=False)
    summary.add_row("counts", ", ".join(f"{k}={v}" for k, v in counts.items() if v))
    summary.add_row("violations", str(status.violation_count))
    console.print(summary)

    if status.phases:
        phases = Table(title="Phases", title_justify="left")
        for column in ("phase", "state", "started", "finished"):
            phases.add_column(column)
        for phase in status.phases:
            phases.add_row(
                phase.name,
                phase.state,
                _time(phase.started_at),
                _time(phase.finished_at),
            )
        console.print(phases)

    if status.action_requests:
        requests = Table(title="Action requests", title_justify="left")
        for column in ("id", "action", "blocking", "state"):
            requests.add_column(column)
        for request in status.action_requests:
            requests.add_row(
                request.request_id, request.action.value, str(request.blocking), request.state
            )
        console.print(requests)

    table = Table(title=f"Violations ({_shown(violations)})", title_justify="left")
    for column in ("source", "line", "offset", "category"):
        table.add_column(column, no_wrap=True)
    for column in ("reason", "excerpt"):
        table.add_column(column, overflow="fold")
    for violation in violations.tail:
        table.add_row(
            violation.source,
            _opt(violation.line),
            _opt(violation.offset),
            violation.category.value,
            violation.reason,
            violation.excerpt[:60],
        )
    console.print(table)

    receipts = Table(title=f"Lifeloop receipts ({_shown(produced)})", title_justify="left")
    for column in ("seq", "event", "status", "failure", "event id"):
        receipts.add_column(column)
    for receipt in produced.tail:
        receipts.add_row(
            _opt(receipt.sequence),
            receipt.event.value,
            receipt.status.value,
            receipt.failure_class.value if receipt.failure_class else "-",
            receipt.event_id,
        )
    console.print(receipts)


def _shown(spool: _Spool[Any]) -> str:
    if spool.count <= len(spool.tail):
        return str(spool.count)
    return f"{spool.count}, the last {len(spool.tail)} shown; --json has them all"


def _opt(value: object) -> str:
    return "-" if value is None else str(value)


def _time(value: Any) -> str:
    return "-" if value is None else value.strftime("%H:%M:%S")


__all__ = ["app", "replay"]
