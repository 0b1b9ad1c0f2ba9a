"""An approval is bound to the digest of the spec it was given for (`spec_digest`). An upgrade
must not change that digest for a spec nobody edited, or every approval given under the
previous release stops counting when the new one starts (and a rollback does the same the other
way): an Intent half approved across `helm upgrade` would need its approvals again.

The values below are what release 0.1.0 (hack/previous-release.env) computes for these specs,
with its own code. If this test fails, a change altered what approvals are bound to: a new
IntentSpec field must default to None (left out of the digest), and the canonical form must
stay as it is. tests/node/test_upgrade.py proves the whole path on a real node.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from lattice_operator.reconcilers.approvals import raw_spec_digest

SPECS: dict[str, tuple[str, str]] = {
    "sprite_task_exec with a credential": (
        """
        kind: sprite_task_exec
        summary: Run the release checks with the deploy token available
        proposedBy: {type: user, name: alice}
        subject: {type: sprite, ref: sample}
        params:
          spriteTaskExec:
            spriteRef: {name: sample}
            command: ["sh", "-c", "echo release checks pass"]
            timeoutSeconds: 600
        allowedActions: [NOTIFY_USER, FETCH_CREDENTIAL]
        credentials:
          - name: deploy-token
            secretKeyRef: {name: deploy-token, key: token}
        """,
        "sha256:8abc45b56b1f0228a5fd4de28a42a899f0d31ed5d8b43aded951ffa25ff92749",
    ),
    "fileops": (
        """
        kind: fileops
        summary: Write the plan files for step 2
        subject: {type: sprite, ref: sample}
        proposedBy: {type: user, name: alice}
        params:
          fileops:
            proto: triflow.fileops.v1
            id: S2
            purpose: write_plan_files
            summary: Write todo.md and update state.json for step 2.
            constraints: {no_network: true, writable_roots: ["."], max_attempts: 2}
            done: ["todo.md lists step 2", "state.json points at step 2"]
            ops:
              - {op: read_file, path: state.json}
              - {op: write_file, path: todo.md, content: "- [ ] step 2\\n"}
              - {op: write_json, path: state.json, value: {current: 2}}
              - {op: run, cmd: "pytest -q", cwd: ".", timeoutMs: 600000}
            report: {changedFiles: true, diffSummary: true, commandOutputs: on_failure}
        """,
        "sha256:05377b6ecef4f0d7f7bd7694de83b934a71e4eb27b62d4dba7058c41a0cfa996",
    ),
    "environment_change": (
        """
        kind: environment_change
        summary: Install Node 20 for repo work
        proposedBy: {type: sprite, name: sample}
        params:
          environmentChange:
            spriteRef: {name: sample}
            observedFailure:
              phase: bootstrap
              exit_code: 127
              stderr_hint: "bash: node: command not found"
            suggestedAdjustment: {type: runtime_install, details: {runtime: node, version: "20"}}
            confidence: 0.85
            evidence: ["package.json present", "no .nvmrc found"]
            scope: repo_specific
        """,
        "sha256:1bf0c6366671f7cf724012343f0fdb4220eabdf9ca1da039483fb5e9da2caebe",
    ),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_digest_of_an_unedited_spec_is_the_previous_releases(name: str) -> None:
    text, previous = SPECS[name]
    spec: dict[str, Any] = yaml.safe_load(text)
    assert raw_spec_digest(spec) == previous
