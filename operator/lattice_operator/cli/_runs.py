"""`lattice resume|cancel|logs`: acting on Runs from the command line."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, TypeVar

import typer

from lattice_operator.cli._format import progress_line, safe
from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, Target, target
from lattice_operator.cli._stop import until_stopped
from lattice_operator.receipt_reader import (
    dropped_receipts,
    receipt_event_params,
    receipts_from_events,
)

T = TypeVar("T")


def parse_input(raw: str, expected: dict[str, str]) -> tuple[str, Any]:
    """`key=value`, the value read as the WAITING declared its type, by JSON's rules only:
    `1_000` is not an integer and `True` is not a boolean (they stay text, and validation
    names the field); maps and arrays are JSON."""
    if "=" not in raw:
        raise typer.BadParameter(f"{raw!r}: expected key=value", param_hint="--input")
    key, _, text = raw.partition("=")
    kind = expected.get(key, "string")
    if kind == "string":
        return key, text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return key, text  # left as given: validation names the field
    except RecursionError as exc:
        raise typer.BadParameter(f"{key}: value nested too deeply", param_hint="--input") from exc
    if kind == "integer":
        return key, value if isinstance(value, int) and not isinstance(value, bool) else text
    if kind == "boolean":
        return key, value if isinstance(value, bool) else text
    return key, value


def parse_inputs(raws: list[str] | None, expected: dict[str, str]) -> dict[str, Any]:
    """Every `-i key=value`; a key given twice is refused, never silently the last one."""
    inputs: dict[str, Any] = {}
    for raw in raws or []:
        key, value = parse_input(raw, expected)
        if key in inputs:
            raise typer.BadParameter(f"{key!r} is given more than once", param_hint="--input")
        inputs[key] = value
    return inputs


def _types_of(values: dict[str, Any]) -> dict[str, str]:
    """The protocol type of each value (to read a repeated resume's inputs alike)."""
    kinds: dict[str, str] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            kinds[key] = "boolean"
        elif isinstance(value, int):
            kinds[key] = "integer"
        elif isinstance(value, str):
            kinds[key] = "string"
        else:
            kinds[key] = "map" if isinstance(value, dict) else "array<string>"
    return kinds


def resume(
    what: Annotated[
        str, typer.Argument(metavar="TARGET", help="The Run (NAME or run/NAME) or intent/NAME.")
    ],
    input: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="key=value; repeatable.")
    ] = None,
    namespace: Namespace = None,
    wait: Annotated[bool, typer.Option(help="Wait until it leaves Waiting.")] = False,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Resume a Waiting Run (or Intent) with inputs, checked against what its WAITING expects."""
    from lattice_operator.protocol.inputs import validate_resume_inputs
    from lattice_operator.reconcilers.run import resume_digest

    plural, name = _object(what)
    where = target(kubeconfig, context, namespace)
    obj = _get(where, plural, name)
    status = obj.get("status") or {}
    if plural == "runs":
        waiting = (status.get("events") or {}).get("waiting")
    else:
        waiting = status.get("waiting")
    if status.get("phase") != "Waiting" or not waiting:
        requested = (obj.get("spec") or {}).get("resume") or {}
        inputs = parse_inputs(input, _types_of(requested.get("inputs") or {}))
        if plural == "runs":
            applied = (status.get("resume") or {}).get("appliedDigest")
            same = bool(requested) and applied == resume_digest(requested["checkpointId"], inputs)
        else:
            same = bool(requested) and requested.get("inputs", {}) == inputs
        if same:
            typer.echo(
                f"no-op: {name} was already resumed from {safe(requested['checkpointId'])} "
                "with these inputs"
            )
            return
        typer.echo(f"{name} is {safe(status.get('phase') or 'Pending')}, not Waiting", err=True)
        raise typer.Exit(1)
    expected: dict[str, str] = waiting.get("expectedInputs") or {}
    inputs = parse_inputs(input, expected)
    problems = validate_resume_inputs(expected, inputs)
    if problems:
        for p in problems:
            typer.echo(f"input {safe(p.field)}: {safe(p.reason)}", err=True)
        raise typer.Exit(2)
    checkpoint = waiting["checkpointId"]
    patch = {"spec": {"resume": {"checkpointId": checkpoint, "inputs": inputs}}}
    where.call(lambda kube: kube.merge_patch(_path(where, plural, name), patch))
    typer.echo(f"resume of {name} from {safe(checkpoint)} requested")
    if wait:
        _wait_phase(where, plural, name, leave={"Waiting", "Resuming"}, timeout=300)


def cancel(
    what: Annotated[
        str, typer.Argument(metavar="TARGET", help="The Run (NAME or run/NAME) or intent/NAME.")
    ],
    namespace: Namespace = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Cancel a Run (its session is killed) or an Intent (and its Run)."""
    plural, name = _object(what)
    where = target(kubeconfig, context, namespace)
    where.call(
        lambda kube: kube.merge_patch(_path(where, plural, name), {"spec": {"cancel": True}})
    )
    typer.echo(f"cancel of {plural[:-1]} {name} requested")


def _object(text: str) -> tuple[str, str]:
    from lattice_adapters.kube import InvalidName, check_name

    kind, _, name = text.rpartition("/")
    plurals = {"": "runs", "run": "runs", "runs": "runs", "intent": "intents", "intents": "intents"}
    if kind not in plurals or not name:
        raise typer.BadParameter(f"{text!r}: expected NAME, run/NAME or intent/NAME")
    try:
        return plurals[kind], check_name(name)
    except InvalidName as exc:
        raise typer.BadParameter(str(exc)) from exc


def _path(where: Target, plural: str, name: str) -> str:
    from lattice_adapters.kube import resource_path
    from lattice_operator.api.v1alpha1.resources import GROUP, VERSION

    return resource_path(GROUP, VERSION, plural, where.namespace, name)


def _get(where: Target, plural: str, name: str) -> dict[str, Any]:
    from lattice_adapters.kube import KubeApiError

    try:
        return where.call(lambda kube: kube.get(_path(where, plural, name)))
    except KubeApiError as exc:
        typer.echo(
            f"cannot read {plural[:-1]} {where.namespace}/{name}: {safe(exc.message)}", err=True
        )
        raise typer.Exit(1) from exc


def _wait_phase(where: Target, plural: str, name: str, *, leave: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        phase = str((_get(where, plural, name).get("status") or {}).get("phase") or "Pending")
        if phase not in leave:
            typer.echo(f"{name}: {safe(phase)}")
            return phase
        time.sleep(1)
    typer.echo(f"{name}: still waiting after {timeout:.0f}s", err=True)
    raise typer.Exit(1)


def logs(
    run: Annotated[str, typer.Argument(help="The Run.")],
    namespace: Namespace = None,
    receipts: Annotated[
        bool, typer.Option(help="Print the Run's Lifeloop receipts in sequence order.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="JSON output.")] = False,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Follow until the Run ends.")
    ] = False,
    instance: Annotated[
        str | None,
        typer.Option(help="Show only receipts reported by this operator instance (Pod name)."),
    ] = None,
    stream: Annotated[
        str | None,
        typer.Option(
            envvar="LATTICE_STREAM_URL",
            help="With -f: follow through the operator's stream instead of polling.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="LATTICE_STREAM_TOKEN", help="A token for --stream.", show_default=False
        ),
    ] = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """Show a Run's progress (phase, events, log tail), or its receipts."""
    where = target(kubeconfig, context, namespace)
    if receipts:
        _print_receipts(where, run, as_json, instance)
        return
    if follow and stream and not as_json:
        from lattice_operator.cli._watch import bearer, follow_run

        _get(where, "runs", run)  # it exists, and it is ours to read
        follow_run(stream, bearer(token, where), where.namespace, run)
        return
    if follow:
        # Ctrl-C or SIGTERM ends the polling as it ends `lattice watch` (130 or 143).
        with until_stopped():
            _show(where, run, as_json=as_json, follow=True)
        return
    _show(where, run, as_json=as_json, follow=False)


def _show(where: Target, run: str, *, as_json: bool, follow: bool) -> None:
    """The Run's progress line (each new one while following), then its log tail."""
    terminal = ("Succeeded", "Failed", "Canceled")
    last = ""
    while True:
        status = _get(where, "runs", run).get("status") or {}
        if as_json:
            typer.echo(json.dumps(status, indent=2))
            return
        line = progress_line(status)
        if line != last:
            typer.echo(line)
            last = line
        phase = status.get("phase") or "Pending"
        if not follow or phase in terminal:
            for text in status.get("logTail") or []:
                typer.echo(f"  | {safe(text)}")
            conditions: list[dict[str, Any]] = status.get("conditions") or []
            cond = next(
                (c for c in conditions if isinstance(c, dict) and c.get("type") == "Succeeded"),
                None,
            )
            if cond is not None:
                typer.echo(safe(f"{cond.get('reason')}: {cond.get('message')}"))
            return
        time.sleep(1)


def fetch_receipts(
    where: Target, run: dict[str, Any], *, instance: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The Run's receipts, from the annotations of its Events, in sequence order, and the
    number of untrusted Events that were left out."""
    from lattice_adapters.kube import resource_path

    path = resource_path("events.k8s.io", "v1", "events", where.namespace)
    params = receipt_event_params(run)
    listing = where.call(lambda kube: kube.get(path, params))
    return receipts_from_events(listing, instance=instance)


def _print_receipts(where: Target, name: str, as_json: bool, instance: str | None) -> None:
    namespace = where.namespace
    run = _get(where, "runs", name)
    receipts, untrusted = fetch_receipts(where, run, instance=instance)
    dropped = dropped_receipts(run)
    notes = []
    if dropped:
        notes.append(
            f"{dropped} receipt(s) of this Run were not posted as Events (rate limit); "
            "they are missing here"
        )
    if untrusted:
        notes.append(
            f"{untrusted} Event(s) carrying a receipt annotation were not reported by the "
            "operator (or are malformed) and are not shown"
        )
    if as_json:
        typer.echo(json.dumps(receipts, indent=2))
        for note in notes:
            typer.echo(note, err=True)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"receipts of {namespace}/{name}")
    for column in ("seq", "event", "status", "failure", "session", "receipt", "instance"):
        table.add_column(column)
    for r in receipts:
        cells = (
            r.get("sequence"),
            r["event"],
            r["status"],
            r.get("failure_class") or "",
            r.get("harness_run_id") or "",
            r["receipt_id"],
            r["reporting_instance"],
        )
        # Text, not markup: a value like "[red]" is shown as written; controls escaped.
        table.add_row(*(Text(safe("" if c is None else c)) for c in cells))
    Console().print(table)
    for note in notes:
        typer.echo(note)
