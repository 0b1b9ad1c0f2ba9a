"""Kubeconfigs as kubectl reads them: each variant read by the pinned kubectl and by `lattice`
against the local API server; both must take the same identity and namespace, or both fail.

Exec credential plugins are shell scripts written here, handing out credentials the API
server accepts: a service account's token, or a client certificate of its client CA."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lattice_adapters.kube import KubeClient, KubeConfig
from tests.support.cluster import Cluster
from tests.support.kubeconfigs import (
    EXEC_V1,
    EXEC_V1BETA1,
    Identities,
    Reading,
    b64,
    clean_env,
    connect_proxy,
    document,
    exec_credential,
    kubectl_reads,
    lattice_cli,
    lattice_reads,
    lattice_reads_in_process,
    plugin,
    printing,
    write,
)
from tests.support.mcp_client import call, lattice_mcp

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class World:
    cluster: Cluster
    ids: Identities
    namespace: str  # the robot's namespace and a context's namespace

    def cluster_entry(self, **extra: Any) -> dict[str, Any]:
        return {
            "server": self.ids.server,
            "certificate-authority-data": b64(self.ids.ca_pem),
            **extra,
        }

    def cert_user(self, pair: tuple[bytes, bytes]) -> dict[str, Any]:
        return {"client-certificate-data": b64(pair[0]), "client-key-data": b64(pair[1])}

    def single(
        self, user: dict[str, Any], *, namespace: str | None = None, **cluster: Any
    ) -> dict[str, Any]:
        context: dict[str, Any] = {"cluster": "local", "user": "me"}
        if namespace:
            context["namespace"] = namespace
        return document(
            clusters={"local": self.cluster_entry(**cluster)},
            users={"me": user},
            contexts={"ctx": context},
            current="ctx",
        )


@dataclass(frozen=True)
class Setup:
    kubeconfig: str | None  # $KUBECONFIG
    args: list[str] = field(default_factory=list)  # the same flags to both
    cwd: Path | None = None


@dataclass(frozen=True)
class Variant:
    name: str
    build: Callable[[World, Path], Setup]
    user: str | None  # "alice", "bob", "robot"; None: both must fail
    namespace: str = "default"  # "<ns>": the world's namespace
    error: tuple[str, ...] = ()  # words lattice's one-line error must contain


@pytest.fixture(scope="module")
def world(cluster: Cluster) -> Iterator[World]:
    namespace = cluster.create_namespace("kubeconfig-parity")
    yield World(cluster, Identities.make(cluster, namespace), namespace)
    cluster.delete_namespace(namespace)


# -- the variants ------------------------------------------------------------------------------


def inline_certs(w: World, d: Path) -> Setup:
    return Setup(str(write(d / "config", w.single(w.cert_user(w.ids.alice)))))


def relative_cert_files(w: World, d: Path) -> Setup:
    # The user's files sit beside the file that names them, in another directory than the
    # cluster's file, and the reader runs elsewhere.
    (d / "u").mkdir()
    (d / "u" / "alice.crt").write_bytes(w.ids.alice[0])
    (d / "u" / "alice.key").write_bytes(w.ids.alice[1])
    (d / "ca.crt").write_bytes(w.ids.ca_pem)
    clusters = write(
        d / "clusters.yaml",
        document(
            clusters={"local": {"server": w.ids.server, "certificate-authority": "ca.crt"}},
            contexts={"ctx": {"cluster": "local", "user": "me"}},
            current="ctx",
        ),
    )
    users = write(
        d / "u" / "users.yaml",
        document(users={"me": {"client-certificate": "alice.crt", "client-key": "alice.key"}}),
    )
    (d / "elsewhere").mkdir()
    return Setup(f"{clusters}:{users}", cwd=d / "elsewhere")


def token(w: World, d: Path) -> Setup:
    return Setup(str(write(d / "config", w.single({"token": w.ids.robot_token}))))


def token_file(w: World, d: Path) -> Setup:
    (d / "robot.token").write_text(w.ids.robot_token + "\n")
    (d / "elsewhere").mkdir()
    return Setup(
        str(write(d / "config", w.single({"tokenFile": "robot.token"}))), cwd=d / "elsewhere"
    )


def exec_user(command: str, api_version: str = EXEC_V1, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"command": command, "apiVersion": api_version}
    if api_version == EXEC_V1:
        body["interactiveMode"] = "Never"
    body.update(extra)
    return {"exec": body}


def exec_v1_token(w: World, d: Path) -> Setup:
    printing(d / "bin" / "cred", exec_credential(EXEC_V1, token=w.ids.robot_token))
    # A relative command with a separator: resolved against the kubeconfig's directory.
    return Setup(str(write(d / "config", w.single(exec_user("./bin/cred")))), cwd=d.parent)


def exec_v1beta1_token(w: World, d: Path) -> Setup:
    cred = printing(d / "cred", exec_credential(EXEC_V1BETA1, token=w.ids.robot_token))
    return Setup(str(write(d / "config", w.single(exec_user(str(cred), EXEC_V1BETA1)))))


def exec_client_cert(w: World, d: Path) -> Setup:
    answer = exec_credential(
        EXEC_V1,
        clientCertificateData=w.ids.bob[0].decode(),
        clientKeyData=w.ids.bob[1].decode(),
        expirationTimestamp=(datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    cred = printing(d / "cred", answer)
    return Setup(str(write(d / "config", w.single(exec_user(str(cred))))))


def exec_args_env_cluster_info(w: World, d: Path) -> Setup:
    # Succeeds only when given its args and env and told the cluster (provideClusterInfo).
    server = json.dumps(w.ids.server)
    cred = plugin(
        d / "cred",
        f"""[ "$1" = "--region" ] && [ "$2" = "eu" ] || {{ echo "args: $*" >&2; exit 2; }}
[ "$PLUGIN_PROFILE" = "dev" ] || {{ echo "no PLUGIN_PROFILE" >&2; exit 2; }}
case "$KUBERNETES_EXEC_INFO" in
  *'"server":{server}'*) ;;
  *) echo "no cluster in $KUBERNETES_EXEC_INFO" >&2; exit 2;;
esac
cat <<'JSON'
{exec_credential(EXEC_V1, token=w.ids.robot_token)}
JSON
""",
    )
    user = exec_user(
        str(cred),
        args=["--region", "eu"],
        env=[{"name": "PLUGIN_PROFILE", "value": "dev"}],
        provideClusterInfo=True,
    )
    return Setup(str(write(d / "config", w.single(user))))


def exec_failing(w: World, d: Path) -> Setup:
    cred = plugin(d / "cred-sso", "echo 'the SSO session expired: run sso login' >&2\nexit 3\n")
    return Setup(str(write(d / "config", w.single(exec_user(str(cred))))))


def exec_missing(w: World, d: Path) -> Setup:
    return Setup(str(write(d / "config", w.single(exec_user("lattice-test-no-such-plugin")))))


def exec_always_interactive(w: World, d: Path) -> Setup:
    cred = printing(d / "cred", exec_credential(EXEC_V1, token=w.ids.robot_token))
    user = exec_user(str(cred), interactiveMode="Always")
    return Setup(str(write(d / "config", w.single(user))))


def exec_v1_without_interactive_mode(w: World, d: Path) -> Setup:
    cred = printing(d / "cred", exec_credential(EXEC_V1, token=w.ids.robot_token))
    user = {"exec": {"command": str(cred), "apiVersion": EXEC_V1}}
    return Setup(str(write(d / "config", w.single(user))))


def merged_list(w: World, d: Path) -> Setup:
    # clusters in one file, users and contexts in another; a missing file in the list; both
    # files set current-context: the first one's wins.
    first = write(
        d / "clusters.yaml",
        document(clusters={"local": w.cluster_entry()}, current="as-alice"),
    )
    second = write(
        d / "users.yaml",
        document(
            users={"alice": w.cert_user(w.ids.alice), "robot": {"token": w.ids.robot_token}},
            contexts={
                "as-alice": {"cluster": "local", "user": "alice"},
                "as-robot": {"cluster": "local", "user": "robot"},
            },
            current="as-robot",
        ),
    )
    return Setup(f"{d / 'missing.yaml'}:{first}:{second}")


def merged_first_entry_wins(w: World, d: Path) -> Setup:
    # The same user name in two files: the first file's entry is the one used.
    first = write(d / "a.yaml", w.single(w.cert_user(w.ids.bob)))
    second = write(d / "b.yaml", w.single(w.cert_user(w.ids.alice)))
    return Setup(f"{first}:{second}")


def context_namespace(w: World, d: Path) -> Setup:
    return Setup(
        str(write(d / "config", w.single(w.cert_user(w.ids.alice), namespace=w.namespace)))
    )


def two_contexts(w: World) -> dict[str, Any]:
    return document(
        clusters={"local": w.cluster_entry()},
        users={"alice": w.cert_user(w.ids.alice), "robot": {"token": w.ids.robot_token}},
        contexts={
            "as-alice": {"cluster": "local", "user": "alice"},
            "as-robot": {"cluster": "local", "user": "robot", "namespace": w.namespace},
        },
        current="as-alice",
    )


def context_flag(w: World, d: Path) -> Setup:
    return Setup(str(write(d / "config", two_contexts(w))), args=["--context", "as-robot"])


def context_flag_unknown(w: World, d: Path) -> Setup:
    return Setup(str(write(d / "config", two_contexts(w))), args=["--context", "nope"])


def kubeconfig_flag(w: World, d: Path) -> Setup:
    # --kubeconfig: that file only, whatever $KUBECONFIG says.
    other = write(d / "other.yaml", w.single(w.cert_user(w.ids.bob)))
    given = write(d / "given.yaml", two_contexts(w))
    return Setup(str(other), args=["--kubeconfig", str(given)])


def insecure_skip_tls_verify(w: World, d: Path) -> Setup:
    doc = w.single(w.cert_user(w.ids.alice))
    doc["clusters"][0]["cluster"] = {"server": w.ids.server, "insecure-skip-tls-verify": True}
    return Setup(str(write(d / "config", doc)))


def insecure_with_a_ca(w: World, d: Path) -> Setup:
    doc = w.single(w.cert_user(w.ids.alice), **{"insecure-skip-tls-verify": True})
    return Setup(str(write(d / "config", doc)))


def no_ca(w: World, d: Path) -> Setup:
    doc = w.single(w.cert_user(w.ids.alice))
    doc["clusters"][0]["cluster"] = {"server": w.ids.server}
    return Setup(str(write(d / "config", doc)))


def tls_server_name(w: World, d: Path) -> Setup:
    # The serving certificate names localhost: verified under that name, dialled at 127.0.0.1.
    doc = w.single(w.cert_user(w.ids.alice), **{"tls-server-name": "localhost"})
    return Setup(str(write(d / "config", doc)))


def tls_server_name_wrong(w: World, d: Path) -> Setup:
    doc = w.single(w.cert_user(w.ids.alice), **{"tls-server-name": "not-the-apiserver.test"})
    return Setup(str(write(d / "config", doc)))


def unknown_user(w: World, d: Path) -> Setup:
    doc = w.single(w.cert_user(w.ids.alice))
    doc["contexts"][0]["context"]["user"] = "ghost"
    return Setup(str(write(d / "config", doc)))


VARIANTS = [
    Variant("inline certs", inline_certs, "alice"),
    Variant("relative cert files", relative_cert_files, "alice"),
    Variant("token", token, "robot"),
    Variant("tokenFile", token_file, "robot"),
    Variant("exec v1 token", exec_v1_token, "robot"),
    Variant("exec v1beta1 token", exec_v1beta1_token, "robot"),
    Variant("exec client cert", exec_client_cert, "bob"),
    Variant("exec args env clusterinfo", exec_args_env_cluster_info, "robot"),
    Variant("exec failing", exec_failing, None, error=("cred-sso", "the SSO session expired")),
    Variant("exec missing", exec_missing, None, error=("lattice-test-no-such-plugin", "not found")),
    Variant("exec Always without terminal", exec_always_interactive, None, error=("terminal",)),
    Variant(
        "exec v1 without interactiveMode",
        exec_v1_without_interactive_mode,
        None,
        error=("interactiveMode",),
    ),
    Variant("merged list", merged_list, "alice"),
    Variant("merged first entry wins", merged_first_entry_wins, "bob"),
    Variant("context namespace", context_namespace, "alice", namespace="<ns>"),
    Variant("--context", context_flag, "robot", namespace="<ns>"),
    Variant("--context unknown", context_flag_unknown, None, error=('context "nope"',)),
    Variant("--kubeconfig", kubeconfig_flag, "alice"),
    Variant("insecure-skip-tls-verify", insecure_skip_tls_verify, "alice"),
    Variant("insecure with a CA", insecure_with_a_ca, None, error=("insecure",)),
    Variant("no CA", no_ca, None, error=("certificate",)),
    Variant("tls-server-name", tls_server_name, "alice"),
    Variant("tls-server-name wrong", tls_server_name_wrong, None, error=("certificate",)),
    Variant("unknown user", unknown_user, None, error=("ghost",)),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_lattice_reads_a_kubeconfig_as_kubectl_does(
    world: World, tmp_path: Path, variant: Variant
) -> None:
    (tmp_path / "kc").mkdir()
    setup = variant.build(world, tmp_path / "kc")
    cwd = setup.cwd or tmp_path
    env = clean_env(tmp_path, setup.kubeconfig)
    kubectl = kubectl_reads(world.cluster.bin_dir / "kubectl", env, setup.args, cwd)
    # The `lattice` process's start adds nothing a kubeconfig could change; the tests below
    # run the console script as a process (lattice_reads, lattice_cli).
    lattice = lattice_reads_in_process(env, setup.args, cwd)
    if variant.user is None:
        assert not kubectl.ok, kubectl
        assert not lattice.ok, lattice
        assert lattice.error.count("\n") == 0, lattice.error
        assert "Traceback" not in lattice.error
        for word in variant.error:
            assert word in lattice.error, (word, lattice.error)
        return
    expected_user = {"alice": "alice", "bob": "bob", "robot": world.ids.robot}[variant.user]
    expected_ns = world.namespace if variant.namespace == "<ns>" else variant.namespace
    assert kubectl == Reading(ok=True, username=expected_user, namespace=expected_ns)
    assert lattice == kubectl


def test_namespace_flag_overrides_the_context(world: World, tmp_path: Path) -> None:
    setup = context_namespace(world, tmp_path)
    env = clean_env(tmp_path, setup.kubeconfig)
    assert lattice_reads_in_process(env, ["-n", "elsewhere"], tmp_path).namespace == "elsewhere"
    assert lattice_reads_in_process(env, [], tmp_path).namespace == world.namespace


def test_proxy_url_carries_the_api_connection(world: World, tmp_path: Path) -> None:
    with connect_proxy() as (url, tunnels):
        doc = world.single(world.cert_user(world.ids.alice), **{"proxy-url": url})
        env = clean_env(tmp_path, str(write(tmp_path / "config", doc)))
        kubectl = kubectl_reads(world.cluster.bin_dir / "kubectl", env, [], tmp_path)
        through_kubectl = len(tunnels)
        lattice = lattice_reads(env, [], tmp_path)
    assert kubectl.ok, kubectl
    assert through_kubectl > 0  # kubectl's connection went through the proxy
    assert lattice == kubectl
    assert len(tunnels) > through_kubectl  # lattice's connection went through it too


# -- what kubectl cannot show: lattice's own use of a plugin over time --------------------------


def test_a_401_runs_the_plugin_again_and_retries_once(world: World, tmp_path: Path) -> None:
    # The plugin's first token is refused (revoked before its expiry); the request is sent
    # again with the next one.
    runs = tmp_path / "runs"
    bad = exec_credential(EXEC_V1, token="revoked." + secrets.token_hex(8))
    good = exec_credential(EXEC_V1, token=world.ids.robot_token)
    cred = plugin(
        tmp_path / "cred",
        f"""echo run >> '{runs}'
if [ "$(wc -l < '{runs}')" -eq 1 ]; then echo '{bad}'; else echo '{good}'; fi
""",
    )
    env = clean_env(tmp_path, str(write(tmp_path / "config", world.single(exec_user(str(cred))))))
    assert lattice_reads(env, [], tmp_path).username == world.ids.robot
    assert runs.read_text().count("run") == 2


def test_a_new_client_certificate_from_the_plugin_is_used(world: World, tmp_path: Path) -> None:
    # Already expired credentials: the plugin runs for every request; its first certificate
    # is alice's, then bob's. One client, two requests, two identities.
    runs = tmp_path / "runs"
    past = "2020-01-01T00:00:00Z"
    alice = exec_credential(
        EXEC_V1,
        clientCertificateData=world.ids.alice[0].decode(),
        clientKeyData=world.ids.alice[1].decode(),
        expirationTimestamp=past,
    )
    bob = exec_credential(
        EXEC_V1,
        clientCertificateData=world.ids.bob[0].decode(),
        clientKeyData=world.ids.bob[1].decode(),
        expirationTimestamp=past,
    )
    (tmp_path / "alice.json").write_text(alice)
    (tmp_path / "bob.json").write_text(bob)
    cred = plugin(
        tmp_path / "cred",
        f"""echo run >> '{runs}'
if [ "$(wc -l < '{runs}')" -eq 1 ]; then cat '{tmp_path}/alice.json'
else cat '{tmp_path}/bob.json'; fi
""",
    )
    path = write(tmp_path / "config", world.single(exec_user(str(cred))))

    async def two_reviews() -> list[str]:
        names = []
        async with KubeClient(KubeConfig.load(path)) as kube:
            for _ in range(2):
                review = await kube.create(
                    "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                )
                names.append(review["status"]["userInfo"]["username"])
        return names

    assert asyncio.run(two_reviews()) == ["alice", "bob"]


# -- the CLI's commands default to the context's namespace ---------------------------------------


def test_logs_reads_the_contexts_namespace(world: World, tmp_path: Path) -> None:
    run = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "in-team", "namespace": world.namespace},
        "spec": {"spriteRef": {"name": "box"}, "workItemId": "w-1", "command": ["true"]},
    }
    world.cluster.kubectl("apply", "-f", "-", input=json.dumps(run))
    cred = printing(
        tmp_path / "cred",
        exec_credential(
            EXEC_V1, clientCertificateData=world.ids.admin[0].decode(),
            clientKeyData=world.ids.admin[1].decode(),
        ),
    )  # fmt: skip
    doc = world.single(exec_user(str(cred)), namespace=world.namespace)
    env = clean_env(tmp_path, str(write(tmp_path / "config", doc)))
    done = lattice_cli(env, ["logs", "in-team"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Pending" in done.stdout, done.stdout


async def test_mcp_cluster_tools_take_the_flags_and_the_contexts_namespace(
    world: World, tmp_path: Path
) -> None:
    run = {
        "apiVersion": "lattice.dev/v1alpha1",
        "kind": "Run",
        "metadata": {"name": "for-mcp", "namespace": world.namespace},
        "spec": {"spriteRef": {"name": "box"}, "workItemId": "w-2", "command": ["true"]},
    }
    world.cluster.kubectl("apply", "-f", "-", input=json.dumps(run))
    doc = two_contexts(world)
    doc["users"].append({"name": "admin", "user": world.cert_user(world.ids.admin)})
    doc["contexts"].append(
        {
            "name": "as-admin",
            "context": {"cluster": "local", "user": "admin", "namespace": world.namespace},
        }
    )
    given = write(tmp_path / "given.yaml", doc)
    # $KUBECONFIG names another file: --kubeconfig and --context decide.
    env = {
        "KUBECONFIG": str(tmp_path / "missing.yaml"),
        "HOME": str(tmp_path),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),  # this checkout's lattice
    }
    args = ("--cluster", "--kubeconfig", str(given), "--context", "as-admin")
    async with lattice_mcp(*args, env=env) as session:
        listed = await call(session, "lattice_cluster_list", kind="runs")
    assert "for-mcp" in {item["name"] for item in listed["items"]}, listed
