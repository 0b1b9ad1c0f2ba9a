"""The MCP sample agent's Run manifest carries exactly the script in manifests/samples/agent/."""

from __future__ import annotations

from tests.support.admission_cases import SAMPLES, sample


def test_the_run_inlines_the_sample_mcp_agent() -> None:
    script = (SAMPLES / "agent" / "sample_mcp_agent.py").read_text()
    assert sample("agent-mcp-run.yaml")["spec"]["command"] == ["python3", "-c", script]
