"""`lattice crds`: write the generated CustomResourceDefinitions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def crds(
    output: Annotated[Path, typer.Option("--output", "-o", help="Directory to write into.")] = Path(
        "crds"
    ),
    check: Annotated[
        bool, typer.Option(help="Do not write; exit 1 if the directory differs from the models.")
    ] = False,
) -> None:
    """Generate the CRDs from the models into crds/ (one file per resource)."""
    from lattice_operator.api.crdgen import all_crds, render

    files = {name: render(doc) for name, doc in all_crds().items()}
    if check:
        stale = [n for n, text in files.items() if _read(output / n) != text]
        extra = (
            sorted(p.name for p in output.glob("*.yaml") if p.name not in files)
            if output.exists()
            else []
        )
        if stale or extra:
            typer.echo(f"out of date: {', '.join(stale + extra)}; run `lattice crds`", err=True)
            raise typer.Exit(1)
        typer.echo(f"{len(files)} CRDs up to date in {output}")
        return
    from lattice_operator.cli._errors import CliError

    if output.exists() and not output.is_dir():
        raise CliError(f"--output {output} is a file, not a directory", exit_code=2)
    try:
        output.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (output / name).write_text(text)
    except OSError as exc:
        raise CliError(f"cannot write CRDs to {output}: {exc.strerror or exc}") from exc
    typer.echo(f"wrote {len(files)} CRDs to {output}")


def _read(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None
