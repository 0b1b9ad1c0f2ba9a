"""Reading kubeconfigs by kubectl's rules, and exec plugins over time (the identities they give
the API server: tests/e2e/test_kubeconfig_parity.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lattice_adapters.kube import KubeConfig, KubeConfigError, use_by_default
from lattice_adapters.kube.exec_plugin import ExecPlugin, ExecSpec
from tests.support.kubeconfigs import EXEC_V1, document, exec_credential, plugin, write

SERVER = "https://127.0.0.1:1"


def one_user(path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    """A kubeconfig of one context: `user` on `cluster` (default: SERVER, unverified)."""
    return write(
        path,
        document(
            clusters={"c": cluster or {"server": SERVER, "insecure-skip-tls-verify": True}},
            users={"u": user},
            contexts={"x": {"cluster": "c", "user": "u"}},
            current="x",
        ),
    )


@pytest.fixture(autouse=True)
def no_ambient_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_kubeconfig_list_merges_as_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Clusters in one file, users (with relative token files) and contexts in another, each
    # file's current-context different, a missing file first: the first value set wins.
    first = write(
        tmp_path / "clusters.yaml",
        document(clusters={"c": {"server": SERVER, "insecure-skip-tls-verify": True}}, current="a"),
    )
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "a.token").write_text("token-a\n")
    second = write(
        tmp_path / "u" / "users.yaml",
        document(
            clusters={"c": {"server": "https://127.0.0.1:2"}},
            users={"a": {"tokenFile": "a.token"}, "b": {"token": "token-b"}},
            contexts={
                "a": {"cluster": "c", "user": "a", "namespace": "team-a"},
                "b": {"cluster": "c", "user": "b"},
            },
            current="b",
        ),
    )
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing.yaml'}::{first}:{second}")
    config = KubeConfig.load()
    assert config.server == SERVER
    assert config.bearer_token() == "token-a"
    assert config.namespace == "team-a"
    other = KubeConfig.load(context="b")
    assert (other.bearer_token(), other.namespace) == ("token-b", "default")


def test_an_empty_file_in_the_list_is_read_as_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty.yaml").write_text("")
    full = write(
        tmp_path / "full.yaml",
        document(
            clusters={"c": {"server": SERVER}},
            users={"u": {"token": "t"}},
            contexts={"x": {"cluster": "c", "user": "u"}},
            current="x",
        ),
    )
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'empty.yaml'}:{full}")
    assert KubeConfig.load().bearer_token() == "t"


def test_explicit_kubeconfig_must_exist(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="does not exist"):
        KubeConfig.load(tmp_path / "nope.yaml")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def spec(command: Path, **extra: Any) -> ExecSpec:
    raw = {"command": str(command), "apiVersion": EXEC_V1, "interactiveMode": "Never", **extra}
    return ExecSpec.parse("me", raw, {"server": SERVER}, None)


def counting_plugin(tmp_path: Path, answer: str) -> tuple[Path, Path]:
    runs = tmp_path / "runs"
    script = plugin(
        tmp_path / "cred",
        f"echo run >> '{runs}'\nprintf '%s' \"$KUBERNETES_EXEC_INFO\" > '{tmp_path}/info'\n"
        f"cat <<'JSON'\n{answer}\nJSON\n",
    )
    return script, runs


def test_plugin_credentials_are_reused_until_shortly_before_they_expire(tmp_path: Path) -> None:
    clock = Clock()
    expires = clock.now + timedelta(minutes=10)
    answer = exec_credential(EXEC_V1, token="t1", expirationTimestamp=expires.isoformat())
    script, runs = counting_plugin(tmp_path, answer)
    exec_plugin = ExecPlugin(spec(script), clock=clock)
    assert exec_plugin.credentials().token == "t1"
    clock.now += timedelta(minutes=9)
    exec_plugin.credentials()
    assert runs.read_text().count("run") == 1
    clock.now += timedelta(seconds=45)  # within REFRESH_BEFORE of the expiry
    exec_plugin.credentials()
    assert runs.read_text().count("run") == 2


def test_a_refused_credential_runs_the_plugin_once_for_all_callers(tmp_path: Path) -> None:
    # Each run hands out a new token (t1, t2, ...).
    runs = tmp_path / "runs"
    script = plugin(
        tmp_path / "cred",
        f"""echo run >> '{runs}'
n=$(wc -l < '{runs}' | tr -d ' ')
echo '{{"apiVersion": "{EXEC_V1}", "kind": "ExecCredential", "status": {{"token": "t'$n'"}}}}'
""",
    )
    exec_plugin = ExecPlugin(spec(script))
    stale = exec_plugin.credentials()
    assert stale.token == "t1"
    assert exec_plugin.refresh(stale).token == "t2"
    # A second request refused with t1 (sent before the refresh) gets t2, no third run.
    assert exec_plugin.refresh(stale).token == "t2"
    assert runs.read_text().count("run") == 2


@pytest.mark.parametrize(
    ("mode", "terminal", "interactive"),
    [("Never", True, False), ("IfAvailable", False, False), ("IfAvailable", True, True)],
)
def test_interactive_mode_decides_what_the_plugin_is_told(
    tmp_path: Path, mode: str, terminal: bool, interactive: bool
) -> None:
    script, _ = counting_plugin(tmp_path, exec_credential(EXEC_V1, token="t"))
    exec_plugin = ExecPlugin(spec(script, interactiveMode=mode), stdin_is_terminal=lambda: terminal)
    exec_plugin.credentials()
    info = json.loads((tmp_path / "info").read_text())
    assert info["spec"]["interactive"] is interactive
    assert "cluster" not in info["spec"]  # provideClusterInfo not asked for


def test_a_plugin_that_needs_a_terminal_without_one_is_an_error(tmp_path: Path) -> None:
    script, runs = counting_plugin(tmp_path, exec_credential(EXEC_V1, token="t"))
    exec_plugin = ExecPlugin(
        spec(script, interactiveMode="Always"), stdin_is_terminal=lambda: False
    )
    with pytest.raises(KubeConfigError, match="needs a terminal"):
        exec_plugin.credentials()
    assert not runs.exists()


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("not json", "did not print an ExecCredential"),
        (exec_credential("client.authentication.k8s.io/v1beta1", token="t"), "apiVersion"),
        (exec_credential(EXEC_V1), "neither a token"),
        (exec_credential(EXEC_V1, clientCertificateData="x"), "needs both"),
        (exec_credential(EXEC_V1, token="t", expirationTimestamp="soon"), "RFC 3339"),
    ],
)
def test_a_bad_plugin_answer_is_named(tmp_path: Path, answer: str, words: str) -> None:
    script, _ = counting_plugin(tmp_path, answer)
    with pytest.raises(KubeConfigError, match=words) as caught:
        ExecPlugin(spec(script)).credentials()
    assert str(script) in str(caught.value)


def test_a_process_wide_choice_applies_to_loads_given_neither(tmp_path: Path) -> None:
    """`lattice run --kubeconfig F --context C`: every load of the operator's reads F and C."""
    chosen = write(
        tmp_path / "chosen.yaml",
        document(
            clusters={"c": {"server": SERVER}},
            users={"a": {"token": "token-a"}, "b": {"token": "token-b"}},
            contexts={"a": {"cluster": "c", "user": "a"}, "b": {"cluster": "c", "user": "b"}},
            current="a",
        ),
    )
    use_by_default(chosen, "b")
    try:
        assert KubeConfig.load().bearer_token() == "token-b"
        assert KubeConfig.load(chosen, "a").bearer_token() == "token-a"  # given: as given
    finally:
        use_by_default(None, None)
    with pytest.raises(KubeConfigError, match="no kubeconfig found"):
        KubeConfig.load()


def test_lattice_run_reads_its_kubeconfig_flag(tmp_path: Path) -> None:
    """The operator's start-up check reads --kubeconfig (and says what is wrong with it)."""
    missing = tmp_path / "nowhere.yaml"
    command = [sys.executable, "-m", "lattice_operator", "run", "--standalone"]
    done = subprocess.run(
        [*command, "--kubeconfig", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert done.returncode != 0
    assert f"kubeconfig {missing} does not exist" in done.stderr, done.stderr


def test_loads_in_threads_at_once_each_get_the_whole_certificate(tmp_path: Path) -> None:
    """The operator loads its kubeconfig in three threads at start-up; the `kubernetes`
    loader's process-wide file cache made some of them read an empty or vanished client
    certificate (and send requests as system:anonymous)."""
    import base64
    from concurrent.futures import ThreadPoolExecutor

    from lattice_adapters import tls

    _, ca_key, ca_cert = tls.make_ca("test-ca")
    pair = tls.client_cert(ca_key, ca_cert, "alice")
    cert, key = pair.cert_pem, pair.key_pem
    path = one_user(
        tmp_path / "certs.yaml",
        {
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode(),
        },
    )

    def load(_: int) -> tuple[bytes | None, bytes | None] | str:
        try:
            config = KubeConfig.load(path)
        except KubeConfigError as exc:
            return str(exc)
        return config.cert_pem, config.key_pem

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(load, range(120)))
    assert set(results) == {(cert, key)}


def test_certificates_and_tokens_are_read_without_the_kubernetes_package(tmp_path: Path) -> None:
    """Its whole client (~15 MB of an operator's memory) is imported only for a user with a
    legacy auth provider: a kubeconfig of certificates, a token or a token file, and the
    in-cluster account, are read without it."""
    from lattice_adapters import tls

    ca, ca_key, ca_cert = tls.make_ca("test-ca")
    pair = tls.client_cert(ca_key, ca_cert, "alice")
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    path = one_user(
        tmp_path / "config",
        {
            "client-certificate-data": b64(pair.cert_pem),
            "client-key-data": b64(pair.key_pem),
            "token": "t0ken",
        },
        {"server": SERVER, "certificate-authority": str(tmp_path / "ca.crt")},
    )
    script = (
        "import sys\n"
        "from lattice_adapters.kube import KubeConfig\n"
        f"c = KubeConfig.load({str(path)!r})\n"
        "assert c.ca_pem and c.cert_pem and c.key_pem and c.bearer_token() == 't0ken', c\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    loaded = KubeConfig.load(path)
    assert (loaded.ca_pem, loaded.cert_pem, loaded.key_pem) == (
        ca.cert_pem,
        pair.cert_pem,
        pair.key_pem,
    )


def b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("user", "words"),
    [
        ({"client-certificate-data": "bm90IGEga2V5"}, "client-certificate and client-key go"),
        ({"client-key-data": "bm90IGEga2V5"}, "client-certificate and client-key go"),
        ({"client-key-data": "***", "client-certificate-data": "eA=="}, "client-key-data is not"),
        ({"username": "admin", "password": "pw"}, "username/password authentication"),
    ],
)
def test_a_users_bad_credentials_are_named(
    tmp_path: Path, user: dict[str, Any], words: str
) -> None:
    with pytest.raises(KubeConfigError, match=words):
        KubeConfig.load(one_user(tmp_path / "config", user))


def test_in_cluster_reads_the_pods_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lattice_adapters.kube import config as config_module

    account = tmp_path / "serviceaccount"
    account.mkdir()
    monkeypatch.setattr(config_module, "IN_CLUSTER_DIR", account)
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeConfigError, match="token is missing or empty"):
        KubeConfig.in_cluster()
    (account / "token").write_text("tok-1\n")
    (account / "ca.crt").write_bytes(b"---ca---")
    (account / "namespace").write_text("lattice-system")
    config = KubeConfig.load()
    assert config.server == "https://[fd00::1]:443"
    assert (config.ca_pem, config.namespace) == (b"---ca---", "lattice-system")
    assert config.bearer_token() == "tok-1"
    (account / "token").write_text("tok-2")  # projected tokens rotate
    assert config.bearer_token() == "tok-2"
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    with pytest.raises(KubeConfigError, match="KUBERNETES_SERVICE_PORT"):
        KubeConfig.in_cluster()


def test_an_oidc_auth_provider_is_read_through_the_kubernetes_package(tmp_path: Path) -> None:
    import base64
    import time

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    id_token = ".".join(
        (part({"alg": "none"}), part({"exp": int(time.time()) + 3600, "sub": "me"}), "sig")
    )
    provider = {"name": "oidc", "config": {"client-id": "lattice", "id-token": id_token}}
    path = one_user(tmp_path / "config", {"auth-provider": provider})
    assert KubeConfig.load(path).bearer_token() == id_token
