"""Collect `bench_*.py` here: pytest's default pattern only finds `test_*.py`."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    # A file named on the command line is collected by pytest itself: not twice.
    if parent.session.isinitpath(file_path):
        return None
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        module: pytest.Module = pytest.Module.from_parent(parent, path=file_path)
        return module
    return None
