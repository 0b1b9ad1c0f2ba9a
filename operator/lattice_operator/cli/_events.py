"""`lattice events replay`: run the event engine offline over a captured stdout and/or outbox."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
        # Offline, all of stdout is read before the outbox: let every copy wait for it.
        limits=EngineLimits(max_provisional=10**6, max_provisional_bytes=1 << 30),
    )
    receipts = RunReceipts(
        run_key=f"replay/{work_item}", work_item_id=work_item, clock=SystemClock()
    )
    receipts.set_session("replay")
    produced = receipts.for_transition(RunTransition.EXEC_STARTING, key="replay")
    produced += receipts.for_transition(RunTransition.EXEC_STARTED, key="replay")
    violations: list[Violation] = []

    def take(result: Any) -> None:
        violations.extend(result.violations)
        for event in result.committed:
            produced.extend(receipts.for_event(event))

    if stdout is not None:
        data = stdout.read_bytes()
        for start in range(0, len(data), frame_bytes):
            take(engine.feed_stdout(data[start : start + frame_bytes]))
    previous: bytes | None = None
    for session_file in outbox or []:
        data = session_file.read_bytes()
        start = 0
        if previous is not None:
            # A resume restored the checkpoint: the file restarts from the part both copies
            # share (up to a line end), and the new session appends after it.
            take(engine.end_session(None))
            start = _shared_prefix(previous, data)
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
            produced.extend(receipts.for_transition(RunTransition.RESUME_STARTING, key=str(start)))
            produced.extend(receipts.for_transition(RunTransition.RESUME_STARTED, key=str(start)))
        _feed_outbox(engine, data, start, take)
        previous = data
    take(engine.end_session(exit_code))
    announced = engine.cursor.terminal_in_session
    produced += receipts.for_transition(
        RunTransition.EXEC_EXITED if announced else RunTransition.EXEC_EXITED_UNANNOUNCED,
        key="replay",
        exit_code=exit_code,
    )

    status = engine.status()
    if as_json:
        document = {
            "status": status.model_dump(mode="json", by_alias=True),
            "cursor": engine.cursor.model_dump(mode="json", by_alias=True),
            "violations": [v.model_dump(mode="json", by_alias=True) for v in violations],
            "receipts": [r.to_wire() for r in produced],
            "logTail": engine.log_tail(),
        }
        typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        _print_tables(engine, status, violations, produced)
    if strict and violations:
        raise typer.Exit(1)


def _feed_outbox(engine: RunEventEngine, data: bytes, offset: int, take: Any) -> None:
    """Feed a whole outbox file from `offset`, in reads of the operator's size."""
    size = _OUTBOX_READ
    while offset < len(data):
        end = min(offset + size, len(data))
        take(engine.feed_outbox(data[offset:end], offset, final=end == len(data)))
        if end == len(data):
            break
        # Read on from the cursor; a line longer than one read needs a larger one.
        moved = engine.cursor.outbox_offset
        size = size * 2 if moved == offset else _OUTBOX_READ
        offset = moved


def _shared_prefix(first: bytes, second: bytes) -> int:
    """Length of the longest common prefix of two outbox copies, ending at a line end."""
    limit = min(len(first), len(second))
    n = 0
    while n < limit and first[n] == second[n]:
        n += 1
    return first.rfind(b"\n", 0, n) + 1


def _print_tables(
    engine: RunEventEngine,
    status: RunEventsStatus,
    violations: list[Violation],
    produced: list[LifecycleReceipt],
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

    table = Table(title=f"Violations ({len(violations)})", title_justify="left")
    for column in ("source", "line", "offset", "category"):
        table.add_column(column, no_wrap=True)
    for column in ("reason", "excerpt"):
        table.add_column(column, overflow="fold")
    for violation in violations:
        table.add_row(
            violation.source,
            _opt(violation.line),
            _opt(violation.offset),
            violation.category.value,
            violation.reason,
            violation.excerpt[:60],
        )
    console.print(table)

    receipts = Table(title=f"Lifeloop receipts ({len(produced)})", title_justify="left")
    for column in ("seq", "event", "status", "failure", "event id"):
        receipts.add_column(column)
    for receipt in produced:
        receipts.add_row(
            _opt(receipt.sequence),
            receipt.event.value,
            receipt.status.value,
            receipt.failure_class.value if receipt.failure_class else "-",
            receipt.event_id,
        )
    console.print(receipts)


def _opt(value: object) -> str:
    return "-" if value is None else str(value)


def _time(value: Any) -> str:
    return "-" if value is None else value.strftime("%H:%M:%S")


__all__ = ["app", "replay"]
