"""Every door answers bad input with one line and a non-zero exit, never a traceback.

The `lattice` entry point is run in-process (`main()`, the console script's function) with
the environment each case sets up; a stand-in API server on 127.0.0.1 plays the parts a real
one never plays (a proxy that answers HTML) and records what the CLI sent.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli_in_process import Outcome, run_cli
from tests.support.fake_api import FakeApi, fake_api, kubeconfig


def assert_refused(outcome: Outcome, *words: str) -> None:
    assert outcome.code != 0, outcome
    text = outcome.out + outcome.err
    assert "Traceback" not in text, text
    for word in words:
        assert word in text, (word, text)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No kubeconfig anywhere unless a test writes one, and not in a cluster."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("LATTICE_DEBUG", raising=False)
    return tmp_path


def write_kubeconfig(home: Path, monkeypatch: pytest.MonkeyPatch, doc: Any) -> Path:
    path = home / "kubeconfig"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


# -- files -------------------------------------------------------------------------------------


def test_crds_output_is_an_existing_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = home / "crds.yaml"
    target.write_text("keep me")
    assert_refused(run_cli(["crds", "-o", str(target)], capsys), "is a file")
    assert target.read_text() == "keep me"


def test_crds_output_under_a_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (home / "f").write_text("")
    assert_refused(run_cli(["crds", "-o", str(home / "f" / "sub")], capsys), "cannot write CRDs")


def test_crds_output_unwritable(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(run_cli(["crds", "-o", "/proc/lattice-crds"], capsys), "cannot write CRDs")


CONFIGS: list[tuple[str, Callable[[Path], Path], str]] = [
    ("missing", lambda d: d / "nope.yaml", "cannot read settings file"),
    ("a directory", lambda d: d, "cannot read settings file"),
    ("invalid YAML", lambda d: _write(d / "c.yaml", "a: [1, 2\n"), "not valid YAML"),
    ("a YAML list", lambda d: _write(d / "c.yaml", "- 1\n- 2\n"), "must be a mapping"),
    ("wrong types", lambda d: _write(d / "c.yaml", "metrics_port: lots\n"), "metrics_port"),
    (
        "a section of the wrong type",
        lambda d: _write(d / "c.yaml", "leader_election: 5\n"),
        "leader_election",
    ),
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(("case", "make", "expected"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_run_config_problems(
    home: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    make: Callable[[Path], Path],
    expected: str,
) -> None:
    outcome = run_cli(["run", "--config", str(make(home))], capsys)
    assert_refused(outcome, expected)
    assert outcome.err.count("\n") == 1  # one line


def test_operator_start_up_with_a_policy_that_does_not_compile(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = {
        "default_policy": {
            "rules": [{"name": "r", "match": "intent.spec.(", "risk": "safe", "outcome": "allow"}]
        }
    }
    config = _write(home / "c.yaml", yaml.safe_dump(policy))
    assert_refused(run_cli(["run", "--config", str(config)], capsys), "default_policy")


def test_operator_start_up_with_no_kubeconfig_exits(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_refused(run_cli(["run"], capsys), "no Kubernetes credentials")


# -- kubeconfigs -------------------------------------------------------------------------------

KUBE_COMMANDS = [["logs", "r1"], ["cancel", "r1"], ["resume", "r1"], ["approve", "i1"]]

KUBECONFIGS: list[tuple[str, Callable[[Path], Any], str]] = [
    ("empty", lambda d: "", "is empty"),
    ("invalid YAML", lambda d: "clusters: [", "cannot read kubeconfig"),
    ("not a mapping", lambda d: "- a\n", "not a mapping"),
    (
        "missing context",
        lambda d: {**kubeconfig("https://127.0.0.1:1"), "current-context": "gone"},
        'context "gone" does not exist',
    ),
    (
        "missing cluster",
        lambda d: {**kubeconfig("https://127.0.0.1:1"), "clusters": []},
        "no cluster named 'c'",
    ),
    ("missing server", lambda d: kubeconfig(""), "has no server"),
    ("server not a URL", lambda d: kubeconfig("not a url"), "is not an http(s) URL"),
    ("bad port", lambda d: kubeconfig("https://127.0.0.1:99999"), "Port out of range"),
    (
        "missing CA file",
        lambda d: kubeconfig("https://127.0.0.1:1", **{"certificate-authority": "ca.pem"}),
        "cannot read certificate-authority",
    ),
    (
        "CA data not base64",
        lambda d: kubeconfig("https://127.0.0.1:1", **{"certificate-authority-data": "%%%"}),
        "not valid base64",
    ),
    (
        "CA data not PEM",
        lambda d: kubeconfig("https://127.0.0.1:1", **{"certificate-authority-data": "aGVsbG8="}),
        "not valid PEM",
    ),
    (
        "connection refused",
        lambda d: kubeconfig(f"http://127.0.0.1:{refused_port()}"),
        "cannot reach the API server",
    ),
]


@pytest.mark.parametrize("command", KUBE_COMMANDS, ids=[c[0] for c in KUBE_COMMANDS])
@pytest.mark.parametrize(("case", "make", "expected"), KUBECONFIGS, ids=[k[0] for k in KUBECONFIGS])
def test_kube_commands_with_bad_kubeconfigs(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    case: str,
    make: Callable[[Path], Any],
    expected: str,
) -> None:
    write_kubeconfig(home, monkeypatch, make(home))
    outcome = run_cli(command, capsys)
    assert_refused(outcome, expected)
    assert outcome.err.strip().count("\n") == 0, outcome.err


@pytest.mark.parametrize("command", KUBE_COMMANDS, ids=[c[0] for c in KUBE_COMMANDS])
def test_kube_commands_with_no_kubeconfig(
    home: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert_refused(run_cli(command, capsys), "no kubeconfig found")


# -- what the API server (or something in its place) answers ------------------------------------

RUN_PATH = "/apis/lattice.dev/v1alpha1/namespaces/default/runs/r1"


def waiting_run(**expected: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "r1", "uid": "u1"},
        "spec": {},
        "status": {
            "phase": "Waiting",
            "events": {"waiting": {"checkpointId": "chk_1", "expectedInputs": expected}},
        },
    }


@pytest.fixture
def api(home: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    with fake_api() as fake:
        write_kubeconfig(home, monkeypatch, kubeconfig(fake.url))
        yield fake


def test_an_answer_that_is_not_json(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.raw(RUN_PATH, b"<html>proxy login</html>", "text/html")
    assert_refused(run_cli(["logs", "r1"], capsys), "not a JSON object")


def test_a_server_path_prefix_is_kept(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_api() as fake:
        write_kubeconfig(home, monkeypatch, kubeconfig(fake.url + "/k8s/clusters/c-1/"))
        fake.json("/k8s/clusters/c-1" + RUN_PATH, {"status": {"phase": "Succeeded"}})
        outcome = run_cli(["logs", "r1"], capsys)
        assert outcome.code == 0, outcome
        assert "Succeeded" in outcome.out
        assert fake.seen == [("GET", "/k8s/clusters/c-1" + RUN_PATH)]


@pytest.mark.parametrize(
    "args",
    [
        ["resume", "wait1?dryRun=All", "-i", "approved=true"],
        ["cancel", "run/..%2Fsecrets"],
        ["logs", "UPPER"],
        ["cancel", "r1", "-n", "../kube-system"],
        ["approve", "i1", "-n", "a/b"],
        ["checkpoints", "list", "UPPER"],
        ["checkpoints", "take", "box", "--name", "../x"],
        ["checkpoints", "restore", "box", "cp?dryRun=All"],
        ["checkpoints", "restore", "box", "cp", "-n", "../kube-system"],
    ],
)
def test_names_and_namespaces_never_reach_a_url_unchecked(
    api: FakeApi, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    assert_refused(run_cli(args, capsys), "invalid")
    assert api.seen == []


@pytest.mark.parametrize(
    "args",
    [
        ["checkpoints", "restore", "box"],
        ["checkpoints", "restore", "box", "cp", "--id", "v3"],
    ],
)
def test_a_restore_names_exactly_one_checkpoint(
    api: FakeApi, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    assert_refused(run_cli(args, capsys), "Exactly one of 'checkpoint'")
    assert api.seen == []


def test_a_checkpoint_comment_is_bounded(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(["checkpoints", "take", "box", "-m", "c" * 1025], capsys)
    assert_refused(outcome, "Parameter 'comment'", "at most 1024")
    assert api.seen == []


def test_resume_refuses_python_number_syntax(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.json(RUN_PATH, waiting_run(count="integer"))
    assert_refused(run_cli(["resume", "r1", "-i", "count=1_000"], capsys), "count")
    assert [m for m, _ in api.seen] == ["GET"]  # nothing patched


def test_resume_takes_json_numbers(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.json(RUN_PATH, waiting_run(count="integer"))
    outcome = run_cli(["resume", "r1", "-i", "count=1000"], capsys)
    assert outcome.code == 0, outcome
    assert [m for m, _ in api.seen] == ["GET", "PATCH"]


def test_resume_refuses_a_key_given_twice(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.json(RUN_PATH, waiting_run(approved="boolean"))
    outcome = run_cli(["resume", "r1", "-i", "approved=true", "-i", "approved=false"], capsys)
    assert_refused(outcome, "more than once")
    assert [m for m, _ in api.seen] == ["GET"]


def test_resume_refuses_deeply_nested_values(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.json(RUN_PATH, waiting_run(plan="map"))
    deep = "[" * 100_000 + "]" * 100_000
    assert_refused(run_cli(["resume", "r1", "-i", f"plan={deep}"], capsys), "nested too deeply")
    assert [m for m, _ in api.seen] == ["GET"]


def test_logs_escape_control_characters(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J done\r\nfake: line"
    api.json(
        RUN_PATH,
        {
            "status": {
                "phase": "Succeeded",
                "events": {"currentPhase": hostile},
                "logTail": [hostile],
                "conditions": [{"type": "Succeeded", "reason": "Done", "message": hostile}],
            }
        },
    )
    outcome = run_cli(["logs", "r1"], capsys)
    assert outcome.code == 0, outcome
    for control in ("\x1b", "\x07", "\r"):
        assert control not in outcome.out
    assert "\\x1b]0;owned\\x07" in outcome.out
    assert outcome.out.count("\n") == 3  # progress line, one log line, the condition


def receipt_event(controller: str, receipt: object, instance: str = "op-0") -> dict[str, Any]:
    text = receipt if isinstance(receipt, str) else json.dumps(receipt)
    return {
        "metadata": {"annotations": {"lattice.dev/receipt": text}},
        "reportingController": controller,
        "reportingInstance": instance,
    }


def receipt(seq: int, rid: str) -> dict[str, Any]:
    return {"sequence": seq, "receipt_id": rid, "event": "run.started", "status": "observed"}


def test_receipts_only_from_the_operator(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    api.json(RUN_PATH, {"metadata": {"name": "r1", "uid": "u1"}, "status": {}})
    api.json(
        "/apis/events.k8s.io/v1/namespaces/default/events",
        {
            "items": [
                receipt_event("lattice.dev/operator", receipt(1, "genuine")),
                receipt_event("someone/else", receipt(2, "forged")),
                receipt_event("lattice.dev/operator", "{not json"),
                receipt_event("lattice.dev/operator", ["a", "list"]),
                receipt_event("lattice.dev/operator", {"sequence": "x", "receipt_id": "bad"}),
                receipt_event("lattice.dev/operator", receipt(3, "other-pod"), instance="op-9"),
            ]
        },
    )
    outcome = run_cli(["logs", "r1", "--receipts", "--json"], capsys)
    assert outcome.code == 0, outcome
    shown = [r["receipt_id"] for r in json.loads(outcome.out)]
    assert shown == ["genuine", "other-pod"]
    assert "4 Event(s) carrying a receipt annotation were not reported" in outcome.err
    outcome = run_cli(["logs", "r1", "--receipts", "--json", "--instance", "op-0"], capsys)
    assert [r["receipt_id"] for r in json.loads(outcome.out)] == ["genuine"]


def test_an_unexpected_error_is_still_one_line(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command's own module, patched to fail in a way no input can make it.
    import lattice_operator.cli._runs as runs

    def broken(*_: object) -> None:
        raise KeyError("surprise")

    monkeypatch.setattr(runs, "progress_line", broken)
    api.json(RUN_PATH, {"status": {}})
    outcome = run_cli(["logs", "r1"], capsys)
    assert_refused(outcome, "unexpected error (KeyError)")
    assert outcome.code == 70
    assert os.environ.get("LATTICE_DEBUG") is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--token", ""], "--token: the token is empty"),
        (["--token", "t", "--port", "70000"], "--port: Input should be less than or equal"),
        (["--token", "t", "--warm-after", "0"], "--warm-after: Input should be greater than 0"),
        (["--token", "t", "--cold-after", "-5"], "--cold-after: Input should be greater than 0"),
        (["--token", "t", "--scrollback", "-1"], "--scrollback: Input should be greater"),
        (["--token", "t", "--warm-after", "60", "--cold-after", "10"], "must not be shorter"),
        (["--token", "t", "--state-dir", "{file}"], "exists and is not a directory"),
    ],
)
def test_sprites_local_start_up_options_are_checked(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "state"
    a_file.write_text("not a directory")
    argv = ["sprites-local", *(arg.replace("{file}", str(a_file)) for arg in args)]
    outcome = run_cli(argv, capsys)
    assert outcome.code == 2
    assert message in outcome.err
    assert "Traceback" not in outcome.err


def _candidate(adjustment: dict[str, Any]) -> dict[str, Any]:
    from tests.support.admission_cases import sample

    doc = sample("intent-environment-change.yaml")
    doc["metadata"] = {"name": "cand", "namespace": "default"}
    doc["spec"]["params"]["environmentChange"]["scope"] = "global_candidate"
    doc["spec"]["params"]["environmentChange"]["suggestedAdjustment"] = adjustment
    done = {"type": "Succeeded", "status": "True", "reason": "GlobalCandidate"}
    doc["status"] = {"conditions": [{**done, "lastTransitionTime": "2026-01-15T10:30:00Z"}]}
    return doc


@pytest.mark.parametrize(
    ("adjustment", "why"),
    [
        ({"type": "enable_network_access", "details": {"domain": "pypi.internal"}}, "--sprite"),
        ({"type": "escalate_to_human", "details": {}}, "a notice"),
    ],
)
def test_a_cluster_wide_promotion_refuses_what_is_no_step(
    api: FakeApi, capsys: pytest.CaptureFixture[str], adjustment: dict[str, Any], why: str
) -> None:
    api.json("/apis/lattice.dev/v1alpha1/namespaces/default/intents/cand", _candidate(adjustment))
    assert_refused(run_cli(["env", "promote", "cand"], capsys), "promote refused", why)
    # Nothing was written: the candidate was read, the Environment never touched.
    assert [method for method, _ in api.seen] == ["GET"]
