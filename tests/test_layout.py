"""Guards the source-root layout: `operator/`, `adapters/` and `devtools/` are never packages;
the operator's distribution and the dev tools' are released together."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

# The CLI's private extension loader names the dev tools' commands these checks compare with.
from lattice_operator.cli import _extensions

ROOT = Path(__file__).resolve().parent.parent


def test_source_roots_have_no_init() -> None:
    for root in ("operator", "adapters", "devtools"):
        assert (ROOT / root).is_dir()
        assert not (ROOT / root / "__init__.py").exists(), f"{root}/__init__.py must never exist"


def test_packages_live_under_the_source_roots() -> None:
    assert (ROOT / "operator" / "lattice_operator" / "__init__.py").exists()
    assert (ROOT / "adapters" / "lattice_adapters" / "__init__.py").exists()
    assert (ROOT / "devtools" / "lattice_devtools" / "__init__.py").exists()


def test_stdlib_operator_is_not_shadowed_in_process() -> None:
    import operator

    assert operator.itemgetter(1)([0, 7]) == 7
    assert "site-packages" not in (operator.__file__ or "") or "lib/python" in (
        operator.__file__ or ""
    )
    assert Path(operator.__file__ or "").parent != ROOT


def test_stdlib_operator_is_not_shadowed_from_repo_root() -> None:
    # A fresh interpreter started in the repository root, with both source roots on
    # the path, must still import the standard library's operator (collections needs it).
    code = (
        "import sys; sys.path[:0] = ['', 'operator', 'adapters'];"
        "import operator, collections, lattice_operator, lattice_adapters;"
        "assert hasattr(operator, 'itemgetter'), operator;"
        "print(operator.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert not out.stdout.strip().startswith(str(ROOT / "operator"))


def test_lattice_packages_import() -> None:
    for name in ("lattice_operator", "lattice_adapters", "lattice_devtools"):
        module = importlib.import_module(name)
        assert module.__file__ is not None


def test_the_dev_tools_are_released_with_the_operator_and_add_the_dev_commands() -> None:
    operator = tomllib.loads((ROOT / "pyproject.toml").read_text())
    devtools = tomllib.loads((ROOT / "devtools" / "pyproject.toml").read_text())
    version = operator["project"]["version"]
    assert devtools["project"]["version"] == version
    assert f"lattice-operator=={version}" in devtools["project"]["dependencies"]
    added = devtools["project"]["entry-points"][_extensions.ENTRY_POINTS]
    assert sorted(added) == sorted(_extensions.DEV_TOOLS)
    # Neither distribution ships the other's packages.
    assert operator["tool"]["setuptools"]["packages"]["find"]["include"] == [
        "lattice_operator*",
        "lattice_adapters*",
    ]
    assert devtools["tool"]["setuptools"]["packages"]["find"]["include"] == ["lattice_devtools*"]


def test_test_modules_share_helpers_only_through_support() -> None:
    """A test module never imports another test module (or a conftest): what several modules
    need lives in tests/support/."""
    tests = Path(__file__).resolve().parent
    offenders = []
    for path in tests.rglob("*.py"):
        if "support" in path.relative_to(tests).parts:
            continue
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("from", "import"):
                module = words[1]
                if module.startswith("tests.") and not module.startswith("tests.support"):
                    offenders.append(f"{path.relative_to(tests)}: {line.strip()}")
    assert offenders == []


def test_unit_test_folders_mirror_the_packages() -> None:
    """Each folder of tests/unit names a package or module of a lattice_* distribution
    (tests/unit/reconcilers/run/ tests lattice_operator/reconcilers/run/); the files directly
    in tests/unit test the suite's own tooling (tests/support, hack)."""
    packages = [path for path in ROOT.glob("*/lattice_*") if (path / "__init__.py").exists()]
    assert packages
    unit = ROOT / "tests" / "unit"
    orphans = []
    for folder in sorted(path for path in unit.rglob("*") if path.is_dir()):
        if folder.name == "__pycache__":
            continue
        parts = folder.relative_to(unit).parts
        named = [package.joinpath(*parts) for package in packages]
        if not any(path.is_dir() or path.with_suffix(".py").is_file() for path in named):
            orphans.append(str(folder.relative_to(ROOT)))
        if not (folder / "__init__.py").exists():
            orphans.append(f"{folder.relative_to(ROOT)} has no __init__.py")
    assert orphans == []


PRIVATE = re.compile(
    r"from lattice_\w+(\.\w+)* import .*\b_[a-z]|import lattice_\w+(\.\w+)*\._[a-z]"
    r"|from lattice_\w+(\.\w+)*\._[a-z]"
)


def test_tests_reach_private_names_only_with_a_reason() -> None:
    """A test imports a `_private` name of a lattice_* package only under a comment saying why
    (the comment heads the imports it covers)."""
    tests = Path(__file__).resolve().parent
    unexplained = []
    for path in sorted(tests.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if not PRIVATE.search(line):
                continue
            above = number - 1
            while above >= 0 and re.match(r"\s*(from |import |\)|\w+,$)", lines[above]):
                above -= 1  # the imports this comment heads
            if above < 0 or not lines[above].lstrip().startswith("#"):
                unexplained.append(f"{path.relative_to(tests)}:{number + 1}: {line.strip()}")
    assert unexplained == []
