"""The sample agent again, speaking the sprite protocol only through `lattice mcp --sprite`.

A stand-in for an AI agent: it starts the Lattice MCP server as a child and calls its tools
over stdio (newline-delimited JSON-RPC 2.0, standard library only, as any MCP client
would), never writing an event itself. It waits for approval (the tool checkpoints, emits
WAITING, and the agent stops) and on resume completes. manifests/samples/agent-mcp-run.yaml
carries this file as its command; LATTICE_BIN names the `lattice` executable (default: PATH).
"""

import json
import os
import subprocess
import sys


class LatticeTools:
    """A minimal MCP client for `lattice mcp --sprite`."""

    def __init__(self):
        lattice = os.environ.get("LATTICE_BIN", "lattice")
        self.proc = subprocess.Popen(
            [lattice, "mcp", "--sprite"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.last_id = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "sample-mcp-agent", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.last_id += 1
        self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
        for line in self.proc.stdout:
            message = json.loads(line)
            if message.get("id") != self.last_id:
                continue  # a notification
            if "error" in message:
                raise SystemExit(f"{method}: {message['error']}")
            return message["result"]
        raise SystemExit("lattice mcp --sprite closed its output")

    def call(self, tool, **arguments):
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        payload = result["structuredContent"]
        if result.get("isError"):
            raise SystemExit(f"{tool}: {payload['error']}")
        return payload

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def first_session(tools):
    tools.call("lattice_sprite_info", message="sample MCP agent starting", kind="note")
    tools.call("lattice_sprite_phase", phase="bootstrap", state="started")
    tools.call("lattice_sprite_progress", message="bootstrap 20%", percent=20, phase="bootstrap")
    tools.call("lattice_sprite_phase", phase="bootstrap", state="finished", success=True)
    tools.call("lattice_sprite_phase", phase="implement", state="started")
    with open("/workspace/change.txt", "w") as f:
        f.write("the sample MCP agent's work product\n")
    tools.call("lattice_sprite_artifact", kind="file", ref="/workspace/change.txt")
    tools.call(
        "lattice_sprite_request_action",
        action="NOTIFY_USER",
        parameters={"message": "plan ready"},
        blocking=False,
    )
    tools.call(
        "lattice_sprite_propose_environment_change",
        observed_failure={"phase": "bootstrap", "exit_code": 127, "stderr_hint": "node: not found"},
        adjustment_type="runtime_install",
        details={"runtime": "node", "version": "20"},
        confidence=0.8,
        evidence=["package.json present"],
        scope="repo_specific",
    )
    tools.call(
        "lattice_sprite_error",
        message="lint found 2 problems; asking a human how to proceed",
        details={"phase": "implement", "problems": 2},
    )
    tools.call("lattice_sprite_phase", phase="implement", state="finished", success=False)
    waited = tools.call(
        "lattice_sprite_wait_for_approval",
        reason="PLAN_APPROVAL",
        expected_inputs={"approved": "boolean", "comments": "array<string>"},
    )
    print(f"waiting on checkpoint {waited['checkpoint_id']}; stopping", flush=True)


def resumed_session(tools, resume):
    inputs = resume["inputs"]
    tools.call("lattice_sprite_phase", phase="finish", state="started")
    tools.call("lattice_sprite_progress", message="finishing 90%", percent=90, phase="finish")
    tools.call("lattice_sprite_phase", phase="finish", state="finished", success=True)
    status = "success" if inputs.get("approved") else "failure"
    tools.call("lattice_sprite_complete", status=status, summary=f"sample MCP agent ({status})")


def main():
    tools = LatticeTools()
    try:
        resume = tools.call("lattice_sprite_resume_inputs")
        if not resume["resumed"]:
            first_session(tools)
        elif resume["replay"]:
            print("resume already processed", flush=True)
        else:
            resumed_session(tools, resume)
    finally:
        tools.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
