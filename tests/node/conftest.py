"""Fixtures of the node tests: the image `make image` builds."""

from __future__ import annotations

import pytest

from tests.support.node_image import OciArchive, build_image


@pytest.fixture(scope="session")
def image() -> OciArchive:
    return build_image()
