"""A single-node Kubernetes cluster inside a network namespace it creates itself.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, the kubelet and
kube-proxy all run inside the namespace (`nsenter --net`), where the node's address lives on a
veth interface in a documentation range and Pods get addresses from a CNI bridge. Nothing is
routed out of it; every client (kubectl, helm, ctr) is run inside it too. What was started
is written to a state file as it starts, so that `stop_node_cluster` — in this process or
another (`lattice cluster down`) — ends exactly those processes (by id and start time),
their containers and mounts, and deletes the namespaces. Needs root.

Used by `lattice cluster up --node` and the node tests (tests/node).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lattice_adapters import tls
from lattice_devtools.localcluster.controlplane import (
    ControlPlaneError,
    ProcessRecord,
    find_bin_dir,
    kill_record,
    kubeconfig_document,
    proc_start_time,
    process_record,
    spawn_logged,
)

NODE_STATE_FILE = "node-state.json"
NODE_IP = "192.0.2.10"  # documentation range (RFC 5737): exists only in the namespace
POD_CIDR = "10.88.0.0/24"
SERVICE_CIDR = "10.96.0.0/24"
SERVICE_API_IP = "10.96.0.1"
NODE_NAME = "lattice-node"
PAUSE_IMAGE = "lattice.invalid/pause:1"
CNI_BIN = Path("/usr/lib/cni")


class NodeError(RuntimeError):
    """The node cluster could not be started or stopped."""


def node_bin_dir(repo_root: Path) -> Path:
    """kubelet, kube-scheduler, kube-proxy and pause, built (once) by hack/."""
    out = subprocess.run(
        ["bash", str(repo_root / "hack" / "build-node-tools.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise NodeError(f"hack/build-node-tools.sh failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


@dataclass
class NodeCluster:
    """Handles to the running node cluster."""

    netns: str
    state: Path
    bin_dir: Path
    node_bin: Path
    kubeconfig: Path
    records: list[ProcessRecord] = field(default_factory=list)
    # Our own children, kept so they are reaped (and Python does not warn about them).
    _children: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # -- the state file ----------------------------------------------------------------------
    def save(self) -> None:
        doc = {
            "netns": self.netns,
            "state": str(self.state),
            "bin_dir": str(self.bin_dir),
            "node_bin": str(self.node_bin),
            "kubeconfig": str(self.kubeconfig),
            "processes": [vars(r) for r in self.records],
        }
        (self.state / NODE_STATE_FILE).write_text(json.dumps(doc, indent=2))

    @classmethod
    def load(cls, state: Path) -> NodeCluster:
        """The cluster recorded in `state`; anything malformed is a NodeError, so no signal
        is ever sent on the word of a corrupt file."""
        path = state / NODE_STATE_FILE
        try:
            doc = json.loads(path.read_text())
            netns = str(doc["netns"])
            records = [process_record(p, path) for p in doc["processes"]]
            cluster = cls(
                netns,
                Path(doc["state"]),
                Path(doc["bin_dir"]),
                Path(doc["node_bin"]),
                Path(doc["kubeconfig"]),
                records,
            )
        except (OSError, ValueError, KeyError, TypeError, ControlPlaneError) as exc:
            raise NodeError(f"{path} is not a node cluster state file: {exc}") from exc
        if not netns.startswith("lattice-node-"):
            raise NodeError(f"{path}: {netns!r} is not a namespace this harness made")
        return cluster

    def reap(self) -> None:
        """Collect the exit status of the processes this object started (after they were
        stopped, possibly by another process)."""
        for child in self._children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)

    def alive(self, name: str) -> bool:
        record = next((r for r in reversed(self.records) if r.name == name), None)
        return record is not None and proc_start_time(record.pid) == record.start_time

    # -- running things inside the namespace -----------------------------------------------
    def ns_cmd(self, *args: str) -> list[str]:
        # Only the network namespace: `ip netns exec` would also give each process a mount
        # namespace of its own (and a fresh /sys without the cgroup mounts), so the kubelet's
        # volume mounts would be invisible to containerd.
        return ["nsenter", f"--net=/run/netns/{self.netns}", *args]

    def run(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 180,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HOME": str(self.state),
            **(env or {}),
        }
        out = subprocess.run(
            self.ns_cmd(*args),
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
        return out

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.bin_dir / "kubectl"), *args, **kw)

    def helm(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.bin_dir / "helm"), *args, **kw)

    def ctr(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        sock = str(self.state / "containerd" / "containerd.sock")
        return self.run("ctr", "--address", sock, "--namespace", "k8s.io", *args, **kw)

    def kube_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        """Start a process inside the namespace, recorded in the state file (so that
        stopping the cluster stops it too)."""
        log_path = self.state / f"{name}.log"
        proc, record = spawn_logged(
            name, self.ns_cmd(*args), log_path, cwd=self.state, env={**os.environ, **(env or {})}
        )
        self._children.append(proc)
        if record is None:
            raise NodeError(f"{name} exited at once:\n{self.log(name)[-3000:]}")
        self.records.append(record)
        self.save()

    def stop(self, name: str) -> None:
        """Stop the processes `spawn` started under `name` (by id, only if still them)."""
        for record in [r for r in self.records if r.name == name]:
            kill_record(record, timeout=20.0)
            self.records.remove(record)
        self.save()
        self.reap()

    def log(self, name: str) -> str:
        path = self.state / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def trust_registry(self, host: str, ca_pem: bytes) -> Path:
        """Make containerd trust `host`'s (`address:port`) TLS certificate from `ca_pem`:
        a hosts.toml under its config_path, read at each pull, so no restart is needed.
        Credentials are not kept here: the kubelet hands containerd a Pod's imagePullSecret."""
        directory = self.state / "containerd" / "certs.d" / host
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ca.crt").write_bytes(ca_pem)
        (directory / "hosts.toml").write_text(
            f'server = "https://{host}"\n\n'
            f'[host."https://{host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
            f'  ca = "{directory / "ca.crt"}"\n'
        )
        return directory / "hosts.toml"

    def import_image(self, archive: Path, name: str | None = None) -> None:
        """Import an OCI archive; with `name`, under that name instead of the archive's.

        The CRI normalises a short name (`lattice-operator:0.1.0`) to one on a public
        registry; a name with a domain of our own avoids that. Only index.json's name
        annotation changes: manifests, config and layers are the archive's own bytes.
        """
        if name is not None:
            archive = _renamed(archive, name, self.state / f"import-{archive.stem}.tar")
        self.ctr("images", "import", str(archive))


def _renamed(archive: Path, name: str, target: Path) -> Path:
    with tarfile.open(archive) as src, tarfile.open(target, "w") as dst:
        for member in src:
            handle = src.extractfile(member) if member.isfile() else None
            if member.name.lstrip("./") == "index.json" and handle is not None:
                index = json.loads(handle.read())
                for manifest in index["manifests"]:
                    manifest.setdefault("annotations", {})["io.containerd.image.name"] = name
                data = json.dumps(index).encode()
                member.size = len(data)
                dst.addfile(member, io.BytesIO(data))
            else:
                dst.addfile(member, handle)
    return target


def _wait(predicate: Any, what: str, timeout: float, cluster: NodeCluster) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.5)
    dead = [r.name for r in cluster.records if not cluster.alive(r.name)]
    tails = "".join(f"\n--- {n}.log ---\n{cluster.log(n)[-3000:]}" for n in dead)
    raise NodeError(f"timed out after {timeout}s waiting for {what}; exited: {dead}{tails}")


def _write_pki(state: Path) -> None:
    pki = state / "pki"
    pki.mkdir()
    serving_ca, serving_key, serving_cert = tls.make_ca("lattice-node-serving-ca")
    serving_ca.write(pki, "serving-ca")
    hosts = (NODE_IP, SERVICE_API_IP, "kubernetes", "kubernetes.default", "kubernetes.default.svc")
    tls.serving_cert(serving_key, serving_cert, hosts).write(pki, "apiserver")
    tls.serving_cert(serving_key, serving_cert, (NODE_IP, NODE_NAME)).write(pki, "kubelet")
    client_ca, client_key, client_cert = tls.make_ca("lattice-node-client-ca")
    client_ca.write(pki, "client-ca")
    admin = tls.client_cert(client_key, client_cert, "lattice-admin", ("system:masters",))
    admin.write(pki, "admin")
    private, public = tls.service_account_keys()
    (pki / "sa.key").write_bytes(private)
    (pki / "sa.pub").write_bytes(public)
    (state / "admin.kubeconfig").write_text(
        kubeconfig_document(
            f"https://{NODE_IP}:6443",
            serving_ca.cert_pem,
            "lattice-admin",
            admin.cert_pem,
            admin.key_pem,
            "lattice-node",
        )
    )


def _containerd_config(state: Path) -> Path:
    cd = state / "containerd"
    (cd / "net.d").mkdir(parents=True)
    (cd / "certs.d").mkdir()
    (cd / "net.d" / "10-bridge.conflist").write_text(
        json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "lattice-pods",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": "cni0",
                        "isGateway": True,
                        "ipMasq": False,
                        "hairpinMode": True,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": POD_CIDR}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                            "dataDir": str(cd / "ipam"),
                        },
                    },
                    {"type": "portmap", "capabilities": {"portMappings": True}},
                ],
            }
        )
    )
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    config = f"""version = 2
root = "{cd / "root"}"
state = "{cd / "state"}"
[grpc]
  address = "{cd / "containerd.sock"}"
[ttrpc]
  address = "{cd / "containerd.sock.ttrpc"}"
[debug]
  address = ""
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # Without it every sandbox fails: CRI asks for a negative oom_score_adj, which needs
  # CAP_SYS_RESOURCE, missing from this machine's bounding set.
  restrict_oom_score_adj = true
  enable_selinux = false
[{cri}.containerd]
  # Not "native": it copies the image's whole filesystem for every container (~300 MB for
  # the operator's), about 100 s of containerd's CPU over the node tests.
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{cd / "net.d"}"
[{cri}.registry]
  # One directory per registry host (hosts.toml: its CA), read at each pull.
  config_path = "{cd / "certs.d"}"
"""
    path = cd / "config.toml"
    path.write_text(config)
    return path


def _kubelet_config(state: Path) -> Path:
    pki = state / "pki"
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{state / 'containerd' / 'containerd.sock'}",
        "address": NODE_IP,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": NODE_IP,
        "healthzPort": 10248,
        "tlsCertFile": str(pki / "kubelet.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(pki / "client-ca.crt")},
        },
        "authorization": {"mode": "AlwaysAllow"},
        # The root filesystem's device cannot be stat'ed here: keep eviction out of the way.
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "clusterDomain": "cluster.local",
        "resolvConf": "",
        "serializeImagePulls": False,
        "registerNode": True,
    }
    path = state / "kubelet.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _pause_archive(state: Path, node_bin: Path) -> Path:
    """An OCI archive of the sandbox image: the pause binary alone."""
    work = state / "pause-image"
    rootfs = work / "rootfs"
    rootfs.mkdir(parents=True)
    shutil.copy2(node_bin / "pause", rootfs / "pause")
    return oci_archive(
        work,
        PAUSE_IMAGE,
        rootfs / "pause",
        "/pause",
        ["--config.entrypoint", "/pause", "--config.user", "65535"],
    )


def oci_archive(work: Path, name: str, source: Path, dest: str, config: list[str]) -> Path:
    """A one-layer OCI image archive (umoci, no daemon): `source` at `dest` in the image,
    umoci's `config` options, and the image name containerd imports it under."""
    layout = work / "oci"
    tag = f"{layout}:1"
    for args in (
        ["init", "--layout", str(layout)],
        ["new", "--image", tag],
        ["insert", "--image", tag, str(source), dest],
        ["config", "--image", tag, *config],
    ):
        subprocess.run(["umoci", *args], check=True, capture_output=True)
    index_path = layout / "index.json"
    index = json.loads(index_path.read_text())
    for manifest in index["manifests"]:
        manifest.setdefault("annotations", {})["io.containerd.image.name"] = name
    index_path.write_text(json.dumps(index))
    archive = work / "image.tar"
    subprocess.run(["tar", "-cf", str(archive), "-C", str(layout), "."], check=True)
    return archive


def _netns_up(netns: str) -> None:
    steps = [
        ["ip", "netns", "add", netns],
        ["ip", "-n", netns, "link", "set", "lo", "up"],
        # A veth pair with both ends inside (this kernel has no dummy interfaces): the
        # node's address on one end, the other end leads nowhere.
        ["ip", "-n", netns, "link", "add", "node0", "type", "veth", "peer", "name", "node0-end"],
        ["ip", "-n", netns, "addr", "add", f"{NODE_IP}/24", "dev", "node0"],
        ["ip", "-n", netns, "link", "set", "node0", "up"],
        ["ip", "-n", netns, "link", "set", "node0-end", "up"],
        # Components look for a default route to pick their address; it leads nowhere.
        ["ip", "-n", netns, "route", "add", "default", "dev", "node0"],
        ["nsenter", f"--net=/run/netns/{netns}", "sysctl", "-qw", "net.ipv4.ip_forward=1"],
    ]
    for step in steps:
        out = subprocess.run(step, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise NodeError(f"{' '.join(step)} failed: {out.stderr}")


@contextlib.contextmanager
def node_cluster(state: Path, repo_root: Path, *, audit_log: bool = False) -> Iterator[NodeCluster]:
    """The whole node cluster for the duration of the block."""
    cluster = start_node_cluster(state, repo_root, audit_log=audit_log)
    try:
        yield cluster
    finally:
        stop_node_cluster(state)


def start_node_cluster(state: Path, repo_root: Path, *, audit_log: bool = False) -> NodeCluster:
    """Start the whole node cluster (recorded in `state` as it starts); on failure, stop
    what was started and raise NodeError."""
    if os.geteuid() != 0:
        raise NodeError("the node cluster needs root (network namespaces, containerd, runc)")
    if (state / NODE_STATE_FILE).exists():
        raise NodeError(f"{state} already holds a node cluster: stop it first")
    bin_dir = find_bin_dir(repo_root)
    node_bin = node_bin_dir(repo_root)
    netns = f"lattice-node-{secrets.token_hex(3)}"
    state.mkdir(parents=True, exist_ok=True)
    _write_pki(state)
    pki = state / "pki"
    kubeconfig = state / "admin.kubeconfig"
    cluster = NodeCluster(netns, state, bin_dir, node_bin, kubeconfig)
    cluster.save()  # before the namespace exists: a failure from here on is cleaned up
    try:
        _netns_up(netns)
        cluster.spawn(
            "etcd",
            [
                str(bin_dir / "etcd"),
                f"--data-dir={state / 'etcd'}",
                "--listen-client-urls=http://127.0.0.1:2379",
                "--advertise-client-urls=http://127.0.0.1:2379",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster=default=http://127.0.0.1:2380",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        audit: list[str] = []
        if audit_log:
            policy = state / "audit-policy.yaml"
            policy.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "audit.k8s.io/v1",
                        "kind": "Policy",
                        "omitStages": ["RequestReceived"],
                        "rules": [{"level": "Metadata"}],
                    }
                )
            )
            audit = [f"--audit-policy-file={policy}", f"--audit-log-path={state / 'audit.log'}"]
        cluster.spawn(
            "kube-apiserver",
            [
                str(bin_dir / "kube-apiserver"),
                "--etcd-servers=http://127.0.0.1:2379",
                "--bind-address=0.0.0.0",
                f"--advertise-address={NODE_IP}",
                "--secure-port=6443",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'client-ca.crt'}",
                f"--kubelet-client-certificate={pki / 'admin.crt'}",
                f"--kubelet-client-key={pki / 'admin.key'}",
                f"--service-account-issuer=https://{NODE_IP}:6443",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--authorization-mode=Node,RBAC",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--enable-aggregator-routing=true",
                # The node has no DNS name anyone can resolve: logs/exec dial its address.
                "--kubelet-preferred-address-types=InternalIP",
                "--allow-privileged=true",
                "--profiling=false",
                *audit,
            ],
        )
        _wait(
            lambda: cluster.kubectl("get", "--raw=/readyz", check=False).returncode == 0,
            "kube-apiserver",
            90,
            cluster,
        )
        cluster.spawn(
            "kube-controller-manager",
            [
                str(bin_dir / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'serving-ca.crt'}",
                "--profiling=false",
            ],
        )
        cluster.spawn(
            "kube-scheduler",
            [
                str(node_bin / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-skip-lookup=true",
                "--bind-address=127.0.0.1",
                "--leader-elect=false",
            ],
        )
        containerd_config = _containerd_config(state)
        cluster.spawn("containerd", ["containerd", "--config", str(containerd_config)])
        _wait(
            lambda: cluster.ctr("version", check=False).returncode == 0,
            "containerd",
            60,
            cluster,
        )
        cluster.import_image(_pause_archive(state, node_bin))
        cluster.spawn(
            "kubelet",
            [
                str(node_bin / "kubelet"),
                f"--config={_kubelet_config(state)}",
                f"--kubeconfig={kubeconfig}",
                f"--node-ip={NODE_IP}",
                f"--hostname-override={NODE_NAME}",
                f"--root-dir={state / 'kubelet'}",
                f"--cert-dir={state / 'kubelet-pki'}",
            ],
        )
        cluster.spawn(
            "kube-proxy",
            [
                str(node_bin / "kube-proxy"),
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={NODE_NAME}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={POD_CIDR}",
                "--conntrack-max-per-core=0",
                "--iptables-localhost-nodeports=false",
                "--metrics-bind-address=127.0.0.1:10249",
                "--healthz-bind-address=127.0.0.1:10256",
            ],
        )

        def node_ready() -> bool:
            out = cluster.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
            if out.returncode != 0:
                return False
            conditions = json.loads(out.stdout)["status"].get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        _wait(node_ready, f"Node {NODE_NAME} Ready", 180, cluster)
    except BaseException:
        stop_node_cluster(state)
        raise
    return cluster


def stop_node_cluster(state: Path) -> bool:
    """Stop the node cluster recorded in `state`: its processes (newest first, by id and
    start time), the containers' shims, the mounts under `state`, the Pods' and the node's
    network namespaces. False if none is recorded there."""
    if not (state / NODE_STATE_FILE).exists():
        return False
    cluster = NodeCluster.load(state)
    pod_netns = _pod_network_namespaces(cluster) if cluster.alive("containerd") else []
    for record in reversed(cluster.records):
        kill_record(record, timeout=20.0)
    _cleanup_containers(state)
    for name in [*pod_netns, cluster.netns]:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)
    (state / NODE_STATE_FILE).unlink()
    return True


def _pod_network_namespaces(cluster: NodeCluster) -> list[str]:
    """The Pods' network namespaces this node's containerd made (under /run/netns)."""
    names: list[str] = []
    listed = cluster.ctr("containers", "ls", "-q", check=False)
    for cid in listed.stdout.split():
        info = cluster.ctr("containers", "info", cid, check=False)
        if info.returncode != 0:
            continue
        spec = json.loads(info.stdout).get("Spec") or {}
        for ns in (spec.get("linux") or {}).get("namespaces") or []:
            path = ns.get("path") or ""
            if ns.get("type") == "network" and "/netns/cni-" in path:
                names.append(Path(path).name)
    return sorted(set(names))


def _cleanup_containers(state: Path) -> None:
    """End the containers' shims this node's containerd started (found by its state path),
    and unmount what the kubelet and containerd mounted under the state directory."""
    marker = str(state / "containerd")
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            cmdline = (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "containerd-shim" in cmdline and marker in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(proc_dir.name), signal.SIGKILL)
    mounts = [
        line.split()[1]
        for line in Path("/proc/self/mounts").read_text().splitlines()
        if line.split()[1].startswith(str(state))
    ]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
