"""Each local sprite has a network namespace of its own, and the server's egress proxy, its
only way out, enforces the sprite's network policy.

Local only. Commands run in sprites through the official SDK; the destination is a small
server on the host's 127.0.0.1 (`tests/support/loopback_server.py`). Servers started here
bind to 127.0.0.1, and no traffic leaves the machine: every name used resolves to loopback
(`localhost` and the names below it), which the proxy refuses unless the server was started
with `--egress-allow-private 127.0.0.1/32`, as the module's own server is.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import sprites

from tests.support.contract_drivers import SdkDriver
from tests.support.loopback_server import LoopbackServer, reachable
from tests.support.sprites_server import LocalSprites, sprites_server

pytestmark = pytest.mark.contract
LIMIT = 4
PROXY = "http://127.0.0.1:3128"

CONNECT_TCP = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    print("connected")
except OSError as exc:
    print("failed", type(exc).__name__)
"""

# CONNECT through the proxy; on 200 a line goes through the tunnel and back (the host
# server echoes it), otherwise the refusal's status and body.
TUNNEL = """
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(f"CONNECT {sys.argv[1]} HTTP/1.1\\r\\nHost: {sys.argv[1]}\\r\\n\\r\\n".encode())
data = b""
while b"\\r\\n\\r\\n" not in data:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
head, _, rest = data.partition(b"\\r\\n\\r\\n")
status = head.split(b" ")[1].decode()
if status == "200":
    s.sendall(b"PING through the tunnel\\n")
    print(status, s.recv(100).decode().strip())
else:
    while chunk := s.recv(4096):
        rest += chunk
    print(status, rest.decode().strip())
"""

# Two tunnels, then wait for the first to be cut (a policy change denies its name) and
# check that the second still carries data.
CUT = """
import socket, sys, time
def tunnel(name):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(f"CONNECT {name} HTTP/1.1\\r\\n\\r\\n".encode())
    head = b""
    while not head.endswith(b"\\r\\n\\r\\n"):
        head += s.recv(1)
    assert b" 200 " in head, head
    s.sendall(b"PING\\n")
    assert s.recv(100) == b"PING\\n"
    return s
doomed, kept = tunnel(sys.argv[1]), tunnel(sys.argv[2])
with open("/workspace/tunnels.log", "a") as log:
    log.write("open\\n")
doomed.settimeout(60)
started = time.monotonic()
try:
    outcome = "data" if doomed.recv(100) else "closed"
except OSError as exc:
    outcome = type(exc).__name__
waited = time.monotonic() - started
kept.sendall(b"still there\\n")
alive = kept.recv(100) == b"still there\\n"
with open("/workspace/tunnels.log", "a") as log:
    log.write(f"{outcome} kept={alive} after={waited:.1f}\\n")
"""

# Hold LIMIT tunnels open, then try one more (it must be answered at once), close one and
# try again.
LIMITED = """
import socket, sys, time
target, limit = sys.argv[1], int(sys.argv[2])
def connect(hold):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(f"CONNECT {target} HTTP/1.1\\r\\n\\r\\n".encode())
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\\r\\n\\r\\n")
    status = head.split(b" ")[1].decode() if head else "none"
    if status == "200" and hold:
        s.sendall(b"HOLD\\n")
        assert s.recv(100) == b"held\\n"
        return s, status, ""
    while status != "200" and (chunk := s.recv(4096)):
        rest += chunk
    s.close()
    return None, status, rest.decode().strip()
held = [connect(True)[0] for _ in range(limit)]
assert all(held)
started = time.monotonic()
_, status, body = connect(False)
print(status, round(time.monotonic() - started, 2), body)
held.pop().close()
for _ in range(50):
    _, status, _ = connect(False)
    if status == "200":
        break
    time.sleep(0.1)
print(status)
"""


@pytest.fixture(scope="module")
def host_server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        assert reachable(server.port)  # the host reaches it: a sprite that cannot is cut off
        yield server


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSprites]:
    """A server whose sprites may reach 127.0.0.1 through the proxy (when their policy
    allows the name), with a small connection limit."""
    extra = ["--egress-allow-private", "127.0.0.1/32", "--egress-max-connections", str(LIMIT)]
    with sprites_server(tmp_path_factory.mktemp("egress"), extra=extra) as server:
        yield server


@pytest.fixture
async def sdk(local_sprites: LocalSprites) -> AsyncIterator[SdkDriver]:
    driver = SdkDriver(local_sprites.credentials)
    try:
        yield driver
    finally:
        await driver.aclose()


@pytest.fixture
async def open_sdk(open_server: LocalSprites) -> AsyncIterator[SdkDriver]:
    driver = SdkDriver(open_server.credentials)
    try:
        yield driver
    finally:
        await driver.aclose()


async def _sprite(driver: SdkDriver) -> str:
    name = f"ct-net-{secrets.token_hex(4)}"
    await driver.create_sprite(name)
    return name


@pytest.fixture
async def sprite(sdk: SdkDriver) -> AsyncIterator[str]:
    name = await _sprite(sdk)
    try:
        yield name
    finally:
        await sdk.delete_sprite(name)


@pytest.fixture
async def open_sprite(open_sdk: SdkDriver) -> AsyncIterator[str]:
    name = await _sprite(open_sdk)
    try:
        yield name
    finally:
        await open_sdk.delete_sprite(name)


async def _policy(driver: SdkDriver, sprite: str, *rules: tuple[str, str]) -> None:
    policy = sprites.NetworkPolicy(rules=[sprites.PolicyRule(domain=d, action=a) for d, a in rules])
    await driver.client.sprite(sprite).update_network_policy(policy)


async def _sh(driver: SdkDriver, sprite: str, script: str) -> tuple[int, str]:
    result = await driver.run(sprite, ["sh", "-c", script])
    return result.exit_code, (result.stdout + result.stderr).decode(errors="replace")


async def _py(driver: SdkDriver, sprite: str, script: str, *args: str) -> str:
    result = await driver.run(sprite, ["python3", "-c", script, *args])
    assert result.exit_code == 0, result
    return result.stdout.decode().strip()


async def _curl(
    driver: SdkDriver, sprite: str, url: str, *, tunnel: bool = False
) -> tuple[str, str]:
    """(status, body) of a request through the proxy from inside the sprite (curl reads
    the proxy from the sprite's environment; `--noproxy ''` lifts NO_PROXY's localhost)."""
    if tunnel:  # curl -p: CONNECT even for http://
        script = f"curl --noproxy '' -p -sS -m 20 -w '\\n%{{http_connect}}' {url}"
    else:
        script = f"curl --noproxy '' -sS -m 20 -w '\\n%{{http_code}}' {url}"
    result = await driver.run(sprite, ["sh", "-c", script])
    body, _, status = result.stdout.decode(errors="replace").rpartition("\n")
    return status.strip(), body.strip()


# -- the namespace ------------------------------------------------------------------------


async def test_a_sprite_cannot_reach_the_hosts_loopback(
    sdk: SdkDriver, sprite: str, host_server: LoopbackServer
) -> None:
    # The host server listens on 127.0.0.1; from inside the sprite, that address is the
    # sprite's own loopback, where nothing listens.
    out = await _py(sdk, sprite, CONNECT_TCP, str(host_server.port))
    assert out == "failed ConnectionRefusedError", out
    before = host_server.connections
    code, out = await _sh(
        sdk, sprite, f"curl -sS -m 10 http://127.0.0.1:{host_server.port}/; echo exit=$?"
    )
    assert "exit=7" in out, out  # couldn't connect (NO_PROXY: straight to loopback)
    assert host_server.connections == before
    # Only a loopback interface, up (the sprite reaches its own listeners), and a
    # namespace that is not the host's.
    code, out = await _sh(
        sdk,
        sprite,
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; readlink /proc/self/ns/net; "
        "python3 -c \"import socket; s = socket.create_server(('127.0.0.1', 0)); "
        "socket.create_connection(s.getsockname(), timeout=5); print('own loopback ok')\"",
    )
    assert code == 0, out
    interfaces, namespace, own = out.splitlines()
    assert interfaces == "lo"
    assert namespace != os.readlink("/proc/self/ns/net")
    assert own == "own loopback ok"


async def test_the_default_environment_points_at_the_proxy(sdk: SdkDriver, sprite: str) -> None:
    _, out = await _sh(sdk, sprite, "env | grep -i _proxy= | sort")
    found = dict(line.split("=", 1) for line in out.splitlines())
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        assert found[name] == found[name.lower()] == PROXY
    assert found["NO_PROXY"] == found["no_proxy"] == "localhost,127.0.0.1,::1"


async def test_loopback_is_refused_even_when_the_policy_allows_the_name(
    sdk: SdkDriver, sprite: str, host_server: LoopbackServer
) -> None:
    await _policy(sdk, sprite, ("localhost", "allow"))
    before = host_server.connections
    for tunnel in (False, True):
        status, body = await _curl(
            sdk, sprite, f"http://localhost:{host_server.port}/", tunnel=tunnel
        )
        assert status == "403", (status, body)
    _, body = await _curl(sdk, sprite, f"http://localhost:{host_server.port}/")
    assert "127.0.0.1 is a loopback address" in body, body
    assert "--egress-allow-private" in body
    assert host_server.connections == before


async def test_two_sprites_cannot_reach_each_others_loopback(sdk: SdkDriver, sprite: str) -> None:
    other = await _sprite(sdk)
    try:
        handle = sdk.client.sprite(other)
        await handle.create_service(
            "web", "python3", ["-m", "http.server", "8000", "--bind", "127.0.0.1"]
        )
        probe = "curl -s -m 5 -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/"
        retry = f'for i in $(seq 50); do [ "$({probe})" = 200 ] && exit 0; sleep 0.2; done'
        code, out = await _sh(sdk, other, f"{retry}; exit 1")
        assert code == 0, out  # its own service answers it
        code, out = await _sh(sdk, sprite, f"{probe}; echo ' exit='$?")
        assert "exit=7" in out, out  # nothing listens on this sprite's loopback
    finally:
        await sdk.delete_sprite(other)


# -- the proxy ----------------------------------------------------------------------------


async def test_a_policy_allowing_localhost_reaches_the_host_through_the_proxy(
    open_sdk: SdkDriver, open_sprite: str, host_server: LoopbackServer
) -> None:
    await _policy(open_sdk, open_sprite, ("localhost", "allow"))
    url = f"http://localhost:{host_server.port}/from-the-sprite?x=1"
    status, body = await _curl(open_sdk, open_sprite, url)
    assert (status, body) == ("200", "hello from the host: GET /from-the-sprite?x=1 HTTP/1.1")
    status, body = await _curl(open_sdk, open_sprite, url, tunnel=True)
    assert (status, body) == ("200", "hello from the host: GET /from-the-sprite?x=1 HTTP/1.1")
    out = await _py(open_sdk, open_sprite, TUNNEL, f"localhost:{host_server.port}")
    assert out == "200 PING through the tunnel"


async def test_a_deny_rule_is_a_403_that_names_it(
    open_sdk: SdkDriver, open_sprite: str, host_server: LoopbackServer
) -> None:
    await _policy(open_sdk, open_sprite, ("*", "allow"), ("localhost", "deny"))
    before = host_server.connections
    status, body = await _curl(open_sdk, open_sprite, f"http://localhost:{host_server.port}/")
    assert status == "403"
    assert 'rule {"action": "deny", "domain": "localhost"} denies localhost' in body, body
    out = await _py(open_sdk, open_sprite, TUNNEL, f"localhost:{host_server.port}")
    assert out.startswith("403 "), out
    assert '"domain": "localhost"' in out, out
    assert host_server.connections == before  # nothing reached the host


async def test_exact_names_beat_wildcards_which_beat_star(
    open_sdk: SdkDriver, open_sprite: str, host_server: LoopbackServer
) -> None:
    await _policy(
        open_sdk,
        open_sprite,
        ("*", "allow"),
        ("*.localhost", "deny"),
        ("ok.localhost", "allow"),
        ("*.deep.localhost", "allow"),
    )
    port = host_server.port
    expected = {
        "ok.localhost": ("200", None),  # exact beats *.localhost
        "bad.localhost": ("403", '"domain": "*.localhost"'),  # *.localhost beats *
        "localhost": ("200", None),  # *.localhost does not match localhost itself
        "a.deep.localhost": ("200", None),  # the longer wildcard wins
        "deep.localhost": ("403", '"domain": "*.localhost"'),
    }
    for name, (want, rule) in expected.items():
        status, body = await _curl(open_sdk, open_sprite, f"http://{name}:{port}/")
        assert status == want, (name, status, body)
        if rule is not None:
            assert rule in body, (name, body)
    # With rules but none that matches (no `*`), a name is refused.
    await _policy(open_sdk, open_sprite, ("ok.localhost", "allow"))
    status, body = await _curl(open_sdk, open_sprite, f"http://localhost:{port}/")
    assert (status, body) == ("403", "refused: no rule of the network policy allows localhost")


async def test_raw_ip_destinations_are_refused(
    open_sdk: SdkDriver, open_sprite: str, host_server: LoopbackServer
) -> None:
    await _policy(open_sdk, open_sprite, ("*", "allow"))
    for target in (f"127.0.0.1:{host_server.port}", f"[::1]:{host_server.port}"):
        status, body = await _curl(open_sdk, open_sprite, f"http://{target}/")
        assert status == "403", (target, status, body)
        assert "raw IP destination" in body
        out = await _py(open_sdk, open_sprite, TUNNEL, target)
        assert out.startswith("403 raw IP destination"), out


async def test_a_policy_change_cuts_open_tunnels_to_newly_denied_names(
    open_sdk: SdkDriver, open_sprite: str, open_server: LocalSprites, host_server: LoopbackServer
) -> None:
    port = host_server.port
    await _policy(open_sdk, open_sprite, ("*", "allow"))
    await open_sdk.write(open_sprite, "/workspace/cut.py", CUT.encode())
    code, out = await _sh(
        open_sdk,
        open_sprite,
        f"nohup python3 /workspace/cut.py doomed.localhost:{port} kept.localhost:{port} "
        "> /workspace/cut.out 2>&1 &",
    )
    assert code == 0, out
    log = open_server.host_root(open_sprite) / "tunnels.log"
    await _wait_for(log, "open\n")
    await _policy(open_sdk, open_sprite, ("*", "allow"), ("doomed.localhost", "deny"))
    text = await _wait_for(log, "kept=")
    outcome = text.splitlines()[1]
    assert outcome.split()[0] in ("closed", "ConnectionResetError"), text
    assert "kept=True" in outcome, text  # the tunnel to a name still allowed stays
    assert float(outcome.split("after=")[1]) < 10, text
    # And a new connection to the name is refused.
    status, _ = await _curl(open_sdk, open_sprite, f"http://doomed.localhost:{port}/")
    assert status == "403"


async def test_connections_beyond_the_limit_are_refused_not_queued(
    open_sdk: SdkDriver, open_sprite: str, open_server: LocalSprites, host_server: LoopbackServer
) -> None:
    await _policy(open_sdk, open_sprite, ("localhost", "allow"))
    out = await _py(open_sdk, open_sprite, LIMITED, f"localhost:{host_server.port}", str(LIMIT))
    refused, again = out.splitlines()
    status, seconds, body = refused.split(" ", 2)
    assert status == "503", out
    assert float(seconds) < 3, out  # answered at once, not queued
    assert f"the sprite has {LIMIT} open" in body, out
    assert again == "200", out  # a closed one makes room
    network = open_server.describe(open_sprite)["network"]
    assert network["over_limit"] >= 1


async def test_checkpoint_restore_and_cold_keep_the_network_working(
    open_sdk: SdkDriver, open_sprite: str, open_server: LocalSprites, host_server: LoopbackServer
) -> None:
    await _policy(open_sdk, open_sprite, ("localhost", "allow"))
    checkpoint = await open_sdk.checkpoint(open_sprite, "allowing localhost")
    await _policy(open_sdk, open_sprite, ("localhost", "deny"))
    url = f"http://localhost:{host_server.port}/"
    assert (await _curl(open_sdk, open_sprite, url))[0] == "403"
    await open_sdk.restore(open_sprite, checkpoint)  # the checkpoint's policy comes back
    assert (await _curl(open_sdk, open_sprite, url))[0] == "200"
    open_server.go_cold(open_sprite)
    assert open_server.describe(open_sprite)["network"]["namespace"] is None
    assert (await _curl(open_sdk, open_sprite, url))[0] == "200"
    assert open_server.describe(open_sprite)["network"]["namespace"] is not None


def test_sandbox_isolation_has_the_namespace_and_the_proxy_too(
    tmp_path: Path, host_server: LoopbackServer
) -> None:
    extra = ["--isolation", "sandbox", "--egress-allow-private", "127.0.0.1/32"]
    with sprites_server(tmp_path / "sandbox", extra=extra) as server:

        async def check() -> None:
            driver = SdkDriver(server.credentials)
            try:
                name = await _sprite(driver)
                out = await _py(driver, name, CONNECT_TCP, str(host_server.port))
                assert out == "failed ConnectionRefusedError", out
                await _policy(driver, name, ("localhost", "allow"))
                url = f"http://localhost:{host_server.port}/sandboxed"
                assert (await _curl(driver, name, url))[0] == "200"
                await driver.delete_sprite(name)
            finally:
                await driver.aclose()

        asyncio.run(check())


def test_bad_egress_options_are_one_line_errors(tmp_path: Path) -> None:
    lattice = str(Path(sys.executable).parent / "lattice")
    for option, value in (
        ("--egress-allow-private", "not-an-address"),
        ("--egress-max-connections", "0"),
        ("--egress-idle-timeout", "-1"),
    ):
        done = subprocess.run(
            [lattice, "sprites-local", "--state-dir", str(tmp_path / "s"), option, value],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "SPRITES_LOCAL_TOKEN": "t"},
            check=False,
        )
        assert done.returncode == 2, done
        assert done.stderr.startswith(f"error: {option}: "), done.stderr
        assert "Traceback" not in done.stderr


async def _wait_for(path: Path, text: str, limit: float = 30.0) -> str:
    for _ in range(int(limit / 0.1)):
        content = await asyncio.to_thread(_read, path)
        if text in content:
            return content
        await asyncio.sleep(0.1)
    raise AssertionError(f"{path} never said {text!r}: {content!r}")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
