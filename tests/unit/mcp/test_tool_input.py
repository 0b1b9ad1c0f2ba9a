"""Every MCP tool's schema is generated from its input model and its arguments validated by
that model: the tool list a client sees is the one it saw when the schemas were written by
hand (tests/data/mcp_tools.json, recorded before the change), and a bad argument is refused
naming the parameter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lattice_operator.mcp.cluster_tools import CLUSTER_TOOLS
from lattice_operator.mcp.errors import ToolError
from lattice_operator.mcp.project_tools import TOOLS
from lattice_operator.mcp.sprite_tools import SPRITE_TOOLS, ProgressInput, RequestActionInput
from lattice_operator.mcp.tool_input import Tool

RECORDED = Path(__file__).parents[2] / "data" / "mcp_tools.json"
ALL: list[Tool[Any, Any]] = [*TOOLS, *SPRITE_TOOLS, *CLUSTER_TOOLS]


def _listed(tools: tuple[Tool[Any, Any], ...]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "inputSchema": t.input_schema()}
        for t in tools
    ]


def test_the_tool_list_is_the_one_written_by_hand_before() -> None:
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    now = {
        "project": _listed(TOOLS),
        "sprite": _listed(SPRITE_TOOLS),
        "cluster": _listed(CLUSTER_TOOLS),
    }
    assert json.loads(json.dumps(now)) == recorded


def _example(schema: dict[str, Any]) -> object:
    """A value the schema allows (the smallest one)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    examples: dict[str, object] = {"string": "x", "boolean": False, "object": {}}
    if kind == "array":
        return [_example(schema["items"])] * schema.get("minItems", 0)
    return examples[kind]


@pytest.mark.parametrize("tool", ALL, ids=lambda t: t.name)
def test_the_schema_and_the_validation_agree(tool: Tool[Any, Any]) -> None:
    schema = tool.input_schema()
    assert schema["additionalProperties"] is False
    assert "$defs" not in json.dumps(schema)
    required = schema["required"]
    properties = schema["properties"]
    # What the schema allows validates: every property at its smallest value, and null for
    # an optional one (absent).
    smallest = {p: _example(s) for p, s in properties.items()}
    tool.input.parse(smallest)
    tool.input.parse({p: smallest[p] if p in required else None for p in properties})
    minimal = {p: smallest[p] for p in required}
    tool.input.parse(minimal)
    # A required parameter left out is named.
    for parameter in required:
        with pytest.raises(ToolError) as missing:
            tool.input.parse({k: v for k, v in minimal.items() if k != parameter})
        assert f"'{parameter}'" in missing.value.message
    # An argument the schema does not list is refused (the SDK let it through unseen).
    with pytest.raises(ToolError) as unknown:
        tool.input.parse({**minimal, "surprise": 1})
    assert unknown.value.code == "INVALID_ARGUMENT"
    assert "Parameter 'surprise' is not a parameter" in unknown.value.message


@pytest.mark.parametrize(
    ("name", "arguments", "parameter"),
    [
        ("lattice_cluster_list", {"kind": 5}, "kind"),
        ("lattice_cluster_list", {"kind": "runs", "all_namespaces": "yes"}, "all_namespaces"),
        ("lattice_cluster_propose_intent", {"spec": []}, "spec"),
        ("lattice_sprite_wait_for_approval", {"reason": "r", "expected_inputs": {"a": 1}}, "a"),
        ("lattice_sprite_progress", {"message": "m", "percent": "50"}, "percent"),
        ("lattice_sprite_progress", {"message": "m", "percent": True}, "percent"),
        ("lattice_close_task", {"lattice_ids": ["L1", 2]}, "lattice_ids"),
        ("lattice_show", {"lattice_id": None}, "lattice_id"),
    ],
)
def test_a_bad_argument_is_named(name: str, arguments: dict[str, Any], parameter: str) -> None:
    [tool] = [t for t in ALL if t.name == name]
    with pytest.raises(ToolError) as refused:
        tool.input.parse(arguments)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert f"'{parameter}" in refused.value.message or f".{parameter}'" in refused.value.message


def test_numbers_and_enums_keep_what_the_caller_wrote() -> None:
    assert type(ProgressInput.parse({"message": "m", "percent": 5}).percent) is int
    assert ProgressInput.parse({"message": "m", "percent": 99.5}).percent == 99.5
    assert str(RequestActionInput.parse({"action": "OPEN_PR"}).action) == "OPEN_PR"
    with pytest.raises(ToolError, match="percent"):
        ProgressInput.parse({"message": "m", "percent": 101})
