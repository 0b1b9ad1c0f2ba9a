"""The network policy as the local server's egress proxy judges names and addresses."""

from __future__ import annotations

import ipaddress

import pytest

# The local server's egress judge (its private _egress and _netpolicy) is the unit under test.
from lattice_devtools.sprites_local._egress import Refused, parse_request
from lattice_devtools.sprites_local._netpolicy import (
    NetworkPolicy,
    address_refusal,
    ip_literal,
    parse_networks,
)


def _policy(*rules: tuple[str, str]) -> NetworkPolicy:
    return NetworkPolicy([{"domain": d, "action": a} for d, a in rules])


def test_no_rules_is_unrestricted() -> None:
    assert NetworkPolicy([]).judge("anything.example").allowed


def test_exact_beats_wildcard_beats_star() -> None:
    policy = _policy(
        ("*", "deny"),
        ("*.example.com", "allow"),
        ("*.internal.example.com", "deny"),
        ("open.internal.example.com", "allow"),
    )
    assert not policy.judge("elsewhere.org").allowed
    assert policy.judge("www.example.com").allowed
    assert not policy.judge("db.internal.example.com").allowed  # the longer wildcard
    assert policy.judge("open.internal.example.com").allowed
    assert not policy.judge("example.com").allowed  # *.example.com is not the apex


def test_deny_wins_among_equally_specific_rules_and_names_the_rule() -> None:
    verdict = _policy(("api.example.com", "allow"), ("api.example.com", "deny")).judge(
        "API.Example.com."
    )
    assert not verdict.allowed
    rule = '{"action": "deny", "domain": "api.example.com"}'
    assert verdict.reason == f"network policy rule {rule} denies api.example.com"


def test_rules_without_a_match_refuse() -> None:
    verdict = _policy(("github.com", "allow")).judge("example.org")
    assert not verdict.allowed
    assert verdict.reason == "no rule of the network policy allows example.org"


def test_the_defaults_preset_allows_the_forges_and_names_its_include() -> None:
    policy = NetworkPolicy([{"include": "defaults"}, {"domain": "*", "action": "deny"}])
    verdict = policy.judge("api.github.com")
    assert verdict.allowed
    assert '{"include": "defaults"}' in verdict.reason
    assert not policy.judge("example.org").allowed


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "100.64.0.1",
        "::1",
        "::",
        "fe80::1",
        "fd00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
    ],
)
def test_non_global_addresses_are_refused(address: str) -> None:
    why = address_refusal(ipaddress.ip_address(address), ())
    assert why is not None
    assert "--egress-allow-private" in why


def test_global_addresses_pass_and_allowances_open_given_ranges() -> None:
    assert address_refusal(ipaddress.ip_address("93.184.216.34"), ()) is None
    assert address_refusal(ipaddress.ip_address("2606:4700::1111"), ()) is None
    allowed = parse_networks(["127.0.0.1", "10.0.0.0/8"])
    assert address_refusal(ipaddress.ip_address("127.0.0.1"), allowed) is None
    assert address_refusal(ipaddress.ip_address("10.9.9.9"), allowed) is None
    assert address_refusal(ipaddress.ip_address("127.0.0.2"), allowed) is not None
    assert address_refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allowed) is None


def test_bad_networks_are_named() -> None:
    with pytest.raises(ValueError, match="'nope' is not an IP address or CIDR"):
        parse_networks(["127.0.0.1", "nope"])


def test_ip_literals() -> None:
    assert ip_literal("127.0.0.1") == ipaddress.ip_address("127.0.0.1")
    assert ip_literal("[::1]") == ipaddress.ip_address("::1")
    assert ip_literal("localhost") is None


def test_connect_requests() -> None:
    request = parse_request(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n")
    assert (request.method, request.host, request.port, request.head) == (
        "CONNECT",
        "example.com",
        443,
        b"",
    )
    assert parse_request(b"CONNECT [::1]:22 HTTP/1.1\r\n\r\n").host == "::1"


def test_absolute_uri_requests_are_rewritten_for_the_origin() -> None:
    request = parse_request(
        b"POST http://example.com:8080/a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\n"
        b"Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n"
        b"Content-Length: 3\r\n\r\n"
    )
    assert (request.host, request.port) == ("example.com", 8080)
    assert request.head == (
        b"POST /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nContent-Length: 3\r\n"
        b"Connection: close\r\n\r\n"
    )
    assert parse_request(b"GET http://example.com HTTP/1.0\r\n\r\n").head == (
        b"GET / HTTP/1.0\r\nHost: example.com\r\nConnection: close\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("head", "message"),
    [
        (b"GET / HTTP/1.1\r\n\r\n", "send absolute http:// URIs"),
        (b"GET https://example.com/ HTTP/1.1\r\n\r\n", "send absolute http:// URIs"),
        (b"CONNECT example.com HTTP/1.1\r\n\r\n", "no host:port"),
        (b"CONNECT example.com:99999 HTTP/1.1\r\n\r\n", "the port is not a number"),
        (b"GET http://u:p@example.com/ HTTP/1.1\r\n\r\n", "credentials in the URL"),
        (b"GET http://example.com/ SPDY/3\r\n\r\n", "not an HTTP/1 request line"),
        (b"GET http://example.com/ HTTP/1.1\r\nno colon\r\n\r\n", "malformed header"),
    ],
)
def test_malformed_requests_are_400s(head: bytes, message: str) -> None:
    with pytest.raises(Refused, match=message) as refused:
        parse_request(head)
    assert refused.value.status == 400
