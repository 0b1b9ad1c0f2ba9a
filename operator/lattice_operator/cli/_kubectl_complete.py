"""`kubectl_complete-lattice`: kubectl's (1.26+) completion of `kubectl lattice …`.

kubectl runs this executable with the words after `lattice`, the one being completed last,
and expects cobra's answer: one candidate a line (`value<TAB>help`), then `:<directive>`."""

from __future__ import annotations

import sys
from typing import Any

from typer._click.shell_completion import CompletionItem, ShellComplete  # typer vendors click

NO_FILE_COMPLETION = 4
"""cobra's ShellCompDirectiveNoFileComp: the shell offers no file names instead."""


class CobraComplete(ShellComplete):
    """click's completion of our commands and options, in cobra's output format."""

    name = "cobra"
    source_template = ""

    def __init__(self, cli: Any, prog_name: str, words: list[str]) -> None:
        super().__init__(cli, {}, prog_name, "_KUBECTL_LATTICE_COMPLETE")
        self._words = words or [""]

    def source_vars(self) -> dict[str, Any]:
        return {}  # kubectl is the shell script here: nothing to source

    def get_completion_args(self) -> tuple[list[str], str]:
        return self._words[:-1], self._words[-1]

    def format_completion(self, item: CompletionItem) -> str:
        help_text = " ".join((item.help or "").split())
        return f"{item.value}\t{help_text}" if help_text else str(item.value)

    def complete(self) -> str:
        return f"{super().complete()}\n:{NO_FILE_COMPLETION}\n".lstrip("\n")


def main(cli: Any, prog_name: str) -> None:
    sys.stdout.write(CobraComplete(cli, prog_name, sys.argv[1:]).complete())
