"""`lattice dev`, `lattice cluster` and `lattice sprites-local` come from the dev tools, a
distribution of their own (devtools/), through the entry point group `lattice.cli_commands`:
without it they answer how to install it, in one line; with it they run; the operator's own
commands never scan the installed distributions for it."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

# The extension loader is private to the CLI; its entry-point lookup is swapped to fake an install.
from lattice_operator.cli import _extensions
from tests.support.cli_in_process import run_cli


def installed(entries: dict[str, EntryPoint], calls: list[str]) -> object:
    def entry_points() -> dict[str, EntryPoint]:
        calls.append("scanned")
        return entries

    return entry_points


@pytest.mark.parametrize("name", _extensions.DEV_TOOLS)
@pytest.mark.parametrize("rest", [[], ["--help"]])
def test_without_the_dev_tools_a_dev_command_says_how_to_install_them(
    name: str, rest: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LATTICE_DEBUG", raising=False)
    monkeypatch.setattr(_extensions, "entry_points", installed({}, []))
    outcome = run_cli([name, *rest], capsys)
    assert outcome.code == 1
    assert outcome.err == (
        f"lattice: `lattice {name}` is one of the dev tools, which are not installed here: "
        "pip install lattice-devtools (in a clone: make venv, or pip install -e ./devtools)\n"
    )


def test_without_the_dev_tools_the_help_lists_only_the_operators_commands(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_extensions, "entry_points", installed({}, []))
    outcome = run_cli(["--help"], capsys)
    assert outcome.code == 0
    assert "approve" in outcome.out
    for name in _extensions.DEV_TOOLS:
        assert f" {name} " not in outcome.out, name


def test_an_unknown_command_is_still_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_extensions, "entry_points", installed({}, []))
    outcome = run_cli(["no-such-command"], capsys)
    assert outcome.code == 2
    assert "No such command 'no-such-command'" in outcome.err
    assert "dev tools" not in outcome.err


@pytest.mark.parametrize("args", [["crds", "--help"], ["approve", "--help"], ["events", "--help"]])
def test_the_operators_own_commands_never_scan_the_installed_distributions(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(_extensions, "entry_points", installed({}, calls))
    outcome = run_cli(args, capsys)
    assert outcome.code == 0, outcome
    assert calls == []


def test_the_installed_dev_tools_add_their_commands(capsys: pytest.CaptureFixture[str]) -> None:
    # The real metadata: devtools/ installed (make venv) or on the path with its metadata.
    assert set(_extensions.entry_points()) >= set(_extensions.DEV_TOOLS)
    cluster = run_cli(["cluster", "--help"], capsys)
    assert cluster.code == 0, cluster
    assert "up" in cluster.out
    assert "down" in cluster.out
    listed = run_cli(["--help"], capsys)
    assert "Commands of lattice-devtools" in listed.out
    for name in _extensions.DEV_TOOLS:
        assert f" {name} " in listed.out, name


def test_an_entry_point_may_name_a_typer_app_or_a_commands_function(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    group = _extensions.ENTRY_POINTS
    entries = {
        "one": EntryPoint("one", "lattice_devtools.cli._cluster:app", group),
        "two": EntryPoint("two", "lattice_devtools.cli._dev:dev", group),
        "three": EntryPoint("three", "lattice_devtools:__all__", group),
    }
    monkeypatch.setattr(_extensions, "entry_points", installed(entries, []))
    assert "down" in run_cli(["one", "--help"], capsys).out
    assert "--exit" in run_cli(["two", "--help"], capsys).out
    broken = run_cli(["three"], capsys)
    assert broken.code == 1
    assert broken.err == "lattice: the command `three` is installed as [], not a command\n"
