"""The suite's own hygiene rules fail tests that break them."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).resolve().parents[1] / "conftest.py").read_text()


def _run_inner(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    # The inner suite gets our real conftest (its cluster fixtures are simply unused).
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=body)
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error\n"
    )
    return pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--rootdir={pytester.path}",
        "-o",
        f"pythonpath={Path(__file__).resolve().parents[2]} "
        f"{Path(__file__).resolve().parents[2] / 'operator'} "
        f"{Path(__file__).resolve().parents[2] / 'adapters'} "
        f"{Path(__file__).resolve().parents[2] / 'devtools'}",
    )


def test_a_leaked_task_fails_the_test(pytester: pytest.Pytester) -> None:
    result = _run_inner(
        pytester,
        "import asyncio\n"
        "async def test_leaks():\n"
        "    asyncio.get_running_loop().create_task(asyncio.sleep(60), name='leaky')\n",
    )
    result.assert_outcomes(passed=1, errors=1)  # the body passes; teardown reports the leak
    result.stdout.fnmatch_lines(["*leaked asyncio tasks*leaky*"])


def test_a_clean_async_test_passes(pytester: pytest.Pytester) -> None:
    result = _run_inner(
        pytester,
        "import asyncio\n"
        "async def test_clean():\n"
        "    task = asyncio.get_running_loop().create_task(asyncio.sleep(0))\n"
        "    await task\n",
    )
    result.assert_outcomes(passed=1)


def test_a_warning_fails_the_test(pytester: pytest.Pytester) -> None:
    result = _run_inner(
        pytester,
        "import warnings\n"
        "def test_warns():\n"
        "    warnings.warn('deprecated thing', DeprecationWarning)\n",
    )
    result.assert_outcomes(failed=1)
