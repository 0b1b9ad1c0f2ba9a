"""The cluster writer's fake applies a list's label selector as the API server would for
equality terms, and refuses the forms it does not apply instead of ignoring them."""

from __future__ import annotations

import pytest

from tests.support.cluster_writer import FakeClusterWriter, equality_selector

EVENTS = ("events.k8s.io", "v1", "events")


def _event(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}}


async def test_list_applies_equality_selectors() -> None:
    writer = FakeClusterWriter()
    writer.put("events", _event("a", run="1", team="x"))
    writer.put("events", _event("b", run="2", team="x"))
    writer.put("events", {"metadata": {"name": "c", "namespace": "ns"}})

    async def names(selector: str | None) -> list[str]:
        listed = await writer.list(EVENTS, "ns", label_selector=selector)
        return sorted(o["metadata"]["name"] for o in listed)

    assert await names(None) == ["a", "b", "c"]
    assert await names("") == ["a", "b", "c"]
    assert await names("team=x") == ["a", "b"]
    assert await names("team=x,run=2") == ["b"]
    assert await names("run==1") == ["a"]
    assert await names("run=3") == []


@pytest.mark.parametrize("selector", ["run!=1", "run in (1,2)", "run", "!run", "run notin (1)"])
async def test_list_refuses_other_selector_forms(selector: str) -> None:
    with pytest.raises(ValueError, match="equality terms only"):
        await FakeClusterWriter().list(EVENTS, "ns", label_selector=selector)
    with pytest.raises(ValueError, match="label_selector term"):
        equality_selector(selector)


async def test_generate_name_gives_each_create_a_fresh_name() -> None:
    writer = FakeClusterWriter()
    manifest = {"metadata": {"generateName": "run-1-"}}
    assert await writer.create(EVENTS, "ns", manifest) is True
    assert await writer.create(EVENTS, "ns", manifest) is True
    assert "name" not in manifest["metadata"]  # the caller's manifest is not written to
    assert sorted(n for _, _, n in writer.objects) == ["run-1-00001", "run-1-00002"]
