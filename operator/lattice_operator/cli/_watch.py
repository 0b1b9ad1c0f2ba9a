"""`lattice watch`: a live terminal view of the operator's stream (Intents awaiting approval,
active Runs with their progress, recent alerts); the stream client `lattice logs -f` shares."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from lattice_operator.cli._errors import CliError
from lattice_operator.cli._format import safe
from lattice_operator.cli._kube import Context, Kubeconfig, Namespace, Target, target
from lattice_operator.cli._stop import until_stopped

StreamUrl = Annotated[
    str | None,
    typer.Option(
        "--stream",
        envvar="LATTICE_STREAM_URL",
        help="The operator's stream (http://host:port), or $LATTICE_STREAM_URL.",
    ),
]
StreamToken = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="LATTICE_STREAM_TOKEN",
        help="A Kubernetes token (default: the kubeconfig's, or $LATTICE_STREAM_TOKEN).",
        show_default=False,
    ),
]
TERMINAL = {"Succeeded", "Failed", "Canceled", "Deleted"}


def bearer(token: str | None, where: Target | None = None) -> str:
    if token:
        return token
    found = (where or target()).config().bearer_token()
    if not found:
        raise CliError(
            "the stream needs a Kubernetes token and this kubeconfig has none (it uses a "
            "client certificate): pass --token, e.g. from `kubectl create token <account>`"
        )
    return found


def events(url: str, token: str, namespace: str | None) -> Iterator[dict[str, Any]]:
    """The stream's events (the envelope, with its id) until it ends; errors as messages."""
    import httpx

    params = {"namespace": namespace} if namespace else {}
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.stream(
            "GET", f"{url.rstrip('/')}/events", params=params, headers=headers, timeout=30
        ) as response:
            if response.status_code in (401, 403):
                response.read()
                raise CliError(f"the stream refused: {response.status_code} {response.text}")
            response.raise_for_status()
            current: dict[str, Any] = {}
            for line in response.iter_lines():
                if line.startswith("id: "):
                    current["id"] = line[4:]
                elif line.startswith("event: "):
                    current["event"] = line[7:]
                elif line.startswith("data: "):
                    current["data"] = json.loads(line[6:])
                elif not line and "data" in current:
                    yield current
                    current = {}
    except httpx.HTTPError as exc:
        raise CliError(f"the stream at {url} failed: {type(exc).__name__}: {exc}") from None


def watch(
    stream: StreamUrl = None,
    token: StreamToken = None,
    namespace: Namespace = None,
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="Every namespace you may read.")
    ] = False,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
) -> None:
    """A live view of Intents awaiting approval, active Runs and recent alerts (in the
    context's namespace, -n's, or with -A all)."""
    from rich.console import Group
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    if not stream:
        raise CliError("no stream URL: pass --stream or set LATTICE_STREAM_URL")
    intents: dict[str, dict[str, Any]] = {}
    runs: dict[str, tuple[dict[str, Any], str]] = {}
    alerts: list[str] = []

    def view() -> Group:
        waiting = Table(title="Intents awaiting approval")
        for column in ("intent", "kind", "asked", "proposed by", "risk", "approvals"):
            waiting.add_column(column)
        for name, ev in sorted(intents.items()):
            p = ev["payload"]
            if p.get("phase") != "AwaitingApproval":
                continue
            by = " ".join(str(v) for v in (p.get("proposedBy") or {}).values())
            cells = (
                name,
                p.get("kind"),
                p.get("summary"),
                by,
                p.get("risk"),
                f"{p.get('approvals')}/{p.get('approversRequired')}",
            )
            waiting.add_row(*(Text(safe(c if c is not None else "")) for c in cells))
        active = Table(title="Runs")
        for column in ("run", "sprite", "phase", "events", "progress", "last line"):
            active.add_column(column)
        for name, (ev, last) in sorted(runs.items()):
            p = ev["payload"]
            progress = p.get("progress") or {}
            percent = progress.get("percent")
            shown = f"{percent}% {progress.get('message', '')}" if percent is not None else ""
            sprite = (ev.get("sprite") or {}).get("name", "")
            cells = (name, sprite, p.get("phase"), p.get("events"), shown, last)
            active.add_row(*(Text(safe(c if c is not None else "")) for c in cells))
        recent = Text("\n".join(alerts[-10:]) or "no alerts")
        return Group(waiting, active, Text("Recent alerts", style="bold"), recent)

    where = target(kubeconfig, context, namespace)
    credential = bearer(token, where)
    if all_namespaces and where.namespace_flag:
        raise CliError("-n and -A cannot be combined", exit_code=2)
    namespace = None if all_namespaces else where.namespace
    if not sys.stdout.isatty():
        # Not a terminal (a pipe, a file): one line per event instead of a redrawn view.
        with until_stopped():
            for item in events(stream, credential, namespace):
                typer.echo(_line(item))
        return
    # Ctrl-C or SIGTERM ends the view (its last state stays on the screen, the cursor comes
    # back: Live's exit runs first), without a traceback.
    with until_stopped(), Live(view(), refresh_per_second=4) as live:
        for item in events(stream, credential, namespace):
            ev = item["data"]
            p = ev.get("payload") or {}
            key = f"{p.get('namespace')}/{p.get('name')}"
            if item["event"] == "intent.updated":
                intents[key] = ev
                if p.get("phase") in TERMINAL:
                    intents.pop(key, None)
            elif item["event"] == "run.output":
                lines = p.get("lines") or []
                last = lines[-1] if lines else runs.get(key, ({}, ""))[1]
                runs[key] = (ev, last)
                if p.get("phase") == "Deleted":
                    runs.pop(key, None)
            elif item["event"] == "system.alert":
                alerts.append(f"{ev.get('ts')} {key} {p.get('reason')}: {p.get('message')}")
                del alerts[:-50]
            elif item["event"] == "gap":
                alerts.append(f"events missed: {p.get('reason')}")
            live.update(view())


def _line(item: dict[str, Any]) -> str:
    ev = item["data"]
    p = ev.get("payload") or {}
    where = f"{p.get('namespace')}/{p.get('name')}"
    if item["event"] == "run.output":
        lines = " | ".join(p.get("lines") or [])
        detail = f"{p.get('phase')} events={p.get('events')}" + (f" | {lines}" if lines else "")
    elif item["event"] == "system.alert":
        detail = f"{p.get('reason')}: {p.get('message')}"
    elif item["event"] == "github.updated":
        detail = _github_detail(p)
    else:
        detail = str(p.get("phase") or p.get("reason") or "")
    return safe(f"{ev.get('ts')} {item['event']} {where} {detail}")


def _github_detail(p: dict[str, Any]) -> str:
    """What an Intent did on GitHub, in a line: the PR, the issues, why it waits."""
    parts = [str(p.get("repo") or "")]
    pull = p.get("pullRequest") or {}
    if pull:
        parts.append(f"PR #{pull.get('number')} {pull.get('url') or ''}".rstrip())
    if p.get("issues"):
        parts.append("issues " + ", ".join(f"#{n}" for n in p["issues"]))
    if p.get("finished"):
        parts.append("finished")
    if p.get("problem"):
        parts.append(f"problem: {p['problem']}")
    return " | ".join(x for x in parts if x)


def follow_run(stream: str, token: str | None, namespace: str, run: str) -> None:
    """`lattice logs -f` over the stream: each new line and phase as it happens."""
    from lattice_operator.cli._format import progress_line

    started = time.monotonic()
    with until_stopped():
        for item in events(stream, bearer(token), namespace):
            ev = item["data"]
            p = ev.get("payload") or {}
            if item["event"] != "run.output" or p.get("name") != run:
                continue
            status = {
                "phase": p.get("phase"),
                "events": {
                    "eventCount": p.get("events"),
                    "currentPhase": p.get("currentPhase"),
                    "progress": p.get("progress") or {},
                },
            }
            typer.echo(progress_line(status))
            for line in p.get("lines") or []:
                typer.echo(f"  | {safe(line)}")
            if p.get("phase") in TERMINAL:
                return
    if os.environ.get("LATTICE_DEBUG"):
        typer.echo(f"stream ended after {time.monotonic() - started:.1f}s", err=True)
