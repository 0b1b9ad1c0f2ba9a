"""The serving and the reconciling operator index every Sprite: one model per version serves
both (handlers/sprite.py's `sprite_directory`)."""

from __future__ import annotations

import gc
from typing import Any, cast

import kopf

from lattice_operator.handlers import sprite as sprite_module
from lattice_operator.handlers.sprite import sprite_directory


def _body(version: str | None, *, uid: str = "u-1") -> kopf.Body:
    metadata: dict[str, Any] = {"namespace": "team", "name": "box", "uid": uid}
    if version is not None:
        metadata["resourceVersion"] = version
    doc = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Sprite",
        "metadata": metadata,
        "spec": {"urlAuth": "sprite"},
        "status": {"phase": "Ready"},
    }
    return kopf.Body(cast(kopf.RawBody, doc))


async def test_both_indexes_share_one_model_per_version() -> None:
    serving = await sprite_directory(body=_body("7"))
    reconciling = await sprite_directory(body=_body("7"))
    assert serving[("team", "box")] is reconciling[("team", "box")]


async def test_a_new_version_or_another_object_is_parsed_anew() -> None:
    first = (await sprite_directory(body=_body("7")))[("team", "box")]
    changed = (await sprite_directory(body=_body("8")))[("team", "box")]
    other = (await sprite_directory(body=_body("7", uid="u-2")))[("team", "box")]
    assert changed is not first
    assert other is not first
    unversioned = (await sprite_directory(body=_body(None)))[("team", "box")]
    assert unversioned is not (await sprite_directory(body=_body(None)))[("team", "box")]


async def test_a_version_no_index_holds_is_not_kept() -> None:
    held = await sprite_directory(body=_body("9", uid="u-3"))
    assert ("u-3", "9") in sprite_module._shared_sprites
    del held
    gc.collect()
    assert ("u-3", "9") not in sprite_module._shared_sprites
