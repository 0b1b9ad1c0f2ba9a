"""The live page's browser harness reads Chromium's DevTools port only once it is written."""

from __future__ import annotations

from pathlib import Path

from tests.support.browser import written_port


def test_the_port_is_read_only_once_its_line_is_whole(tmp_path: Path) -> None:
    port_file = tmp_path / "DevToolsActivePort"
    assert written_port(port_file) is None  # not created yet
    port_file.write_text("")
    assert written_port(port_file) is None  # created, nothing written (seen under load)
    port_file.write_text("412")
    assert written_port(port_file) is None  # the line not ended: maybe more digits to come
    port_file.write_text("41297\n/devtools/browser/0e1f")
    assert written_port(port_file) == 41297
