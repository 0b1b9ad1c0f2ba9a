"""A private OCI registry for the node tests, as a platform team runs one: CNCF distribution's
`registry` with TLS from a CA the test makes and htpasswd basic auth, inside the node's
network namespace (on the node's address, where its containerd pulls from), recorded with
the node cluster so `lattice cluster down` stops it too. The image is pushed with `crane`
(an OCI layout, byte for byte: its digest is the one `make image` built), the chart with
helm as an OCI artifact. The binaries come from hack/build-registry.sh (pinned, cached)."""

from __future__ import annotations

import json
import secrets
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from lattice_adapters import tls
from lattice_devtools.localcluster.node import NODE_IP, NodeCluster

ROOT = Path(__file__).resolve().parents[2]
REGISTRY_PORT = 5000
USER = "lattice-ci"


def registry_bin_dir() -> Path:
    """registry, crane and htpasswd, built (once) by hack/build-registry.sh."""
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-registry.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, f"hack/build-registry.sh failed:\n{out.stderr[-4000:]}"
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class Registry:
    """The running registry: where it is, its CA, and the one account it accepts."""

    node: NodeCluster
    bin_dir: Path
    workdir: Path
    host: str
    ca_file: Path
    password: str

    @property
    def username(self) -> str:
        return USER

    def _crane(self, *args: str, input: str | None = None) -> str:
        # crane has no --ca-file: Go reads the CA bundle from SSL_CERT_FILE.
        env = {"SSL_CERT_FILE": str(self.ca_file), "DOCKER_CONFIG": str(self.workdir / "docker")}
        out = self.node.run(str(self.bin_dir / "crane"), *args, input=input, env=env, timeout=600)
        return out.stdout.strip()

    def push_image(self, archive: Path, repository: str, tag: str) -> str:
        """Push an OCI archive's one image as `repository:tag`; its manifest digest."""
        layout = self.workdir / f"layout-{archive.parent.name}"
        layout.mkdir(exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(layout, filter="data")
        self._crane("auth", "login", self.host, "-u", USER, "--password-stdin", input=self.password)
        pushed = self._crane("push", str(layout), f"{self.host}/{repository}:{tag}")
        name, _, digest = pushed.rpartition("@")
        assert name == f"{self.host}/{repository}", pushed
        return digest

    def login_helm(self) -> None:
        self.node.helm(
            "registry", "login", self.host, "--username", USER, "--password-stdin",
            "--ca-file", str(self.ca_file),
            input=self.password,
        )  # fmt: skip

    def push_chart(self, package: Path, path: str) -> str:
        """`helm push` a packaged chart under oci://host/`path`; its digest."""
        out = self.node.helm(
            "push", str(package), f"oci://{self.host}/{path}", "--ca-file", str(self.ca_file)
        )
        lines = [line for line in (out.stdout + out.stderr).splitlines() if "Digest:" in line]
        assert lines, out.stdout + out.stderr
        return lines[0].split("Digest:", 1)[1].strip()

    def status(self, path: str, *curl: str) -> int:
        """The HTTP status of GET https://host/`path` from inside the namespace."""
        out = self.node.run(
            "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(self.ca_file),
            *curl, f"https://{self.host}{path}",
            check=False,
        )  # fmt: skip
        return int(out.stdout or 0)

    def log(self) -> str:
        return self.node.log("registry")


def start_registry(node: NodeCluster, workdir: Path) -> Registry:
    """The registry on the node's address: a CA and certificate made here, an htpasswd with
    one account, the node's containerd told to trust the CA (not given the password: the
    kubelet passes a Pod's imagePullSecret)."""
    bin_dir = registry_bin_dir()
    workdir.mkdir(parents=True, exist_ok=True)
    host = f"{NODE_IP}:{REGISTRY_PORT}"
    ca, ca_key, ca_cert = tls.make_ca("lattice-node-test-registry-ca")
    ca.write(workdir, "ca")
    tls.serving_cert(ca_key, ca_cert, (NODE_IP,)).write(workdir, "registry")
    password = secrets.token_urlsafe(18)
    htpasswd = subprocess.run(
        [str(bin_dir / "htpasswd"), USER],
        input=password,
        capture_output=True,
        text=True,
        check=True,
    )
    (workdir / "htpasswd").write_text(htpasswd.stdout)
    config = {
        "version": 0.1,
        "log": {"level": "info", "fields": {"service": "registry"}},
        "storage": {
            "filesystem": {"rootdirectory": str(workdir / "storage")},
            "delete": {"enabled": True},
        },
        "http": {
            "addr": host,
            "secret": secrets.token_hex(16),
            "tls": {
                "certificate": str(workdir / "registry.crt"),
                "key": str(workdir / "registry.key"),
            },
        },
        "auth": {"htpasswd": {"realm": "lattice-node-test", "path": str(workdir / "htpasswd")}},
    }
    (workdir / "config.yml").write_text(yaml.safe_dump(config))
    # No trace exporter: its default would dial an OTLP collector on localhost.
    node.spawn(
        "registry",
        [str(bin_dir / "registry"), "serve", str(workdir / "config.yml")],
        env={"OTEL_TRACES_EXPORTER": "none"},
    )
    registry = Registry(node, bin_dir, workdir, host, workdir / "ca.crt", password)
    deadline = time.monotonic() + 60
    while registry.status("/v2/") != 401:  # up, and asking for credentials
        assert time.monotonic() < deadline, f"the registry did not start:\n{registry.log()[-3000:]}"
        time.sleep(0.5)
    node.trust_registry(host, ca.cert_pem)
    return registry


def archive_digest(archive: Path) -> str:
    """The digest of the one manifest an OCI archive's index.json names."""
    with tarfile.open(archive) as tar:
        handle = tar.extractfile("./index.json")
        assert handle is not None
        (entry,) = json.loads(handle.read())["manifests"]
    return str(entry["digest"])
