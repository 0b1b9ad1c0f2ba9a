"""A sprite's network policy as the egress proxy applies it (pure: no I/O).

The rules are the Sprites API's: `{"domain": "*.github.com", "action": "allow"|"deny"}` or
`{"include": "defaults"}`. A name is judged by the most specific rules that match it: an
exact name beats the longest matching `*.suffix` wildcard, which beats `*`; among equally
specific rules a deny wins. `*.example.com` matches names below example.com, not
example.com itself. No rules at all means unrestricted; with rules, a name that none
matches is refused (the rules are an allow list unless `*` says otherwise).

Destinations are judged twice: the name by the policy, then every address the name
resolves to. Loopback, private, link-local, unspecified, multicast and other non-global
addresses (IPv4 and IPv6, IPv4-mapped included) are always refused unless the server was
started with an explicit allowance for them (`--egress-allow-private`). A raw IP address in
place of a name is refused: the sprite has no resolver, so no address it names came from an
allowed lookup.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_DOMAINS = (
    "github.com",
    "*.github.com",
    "*.githubusercontent.com",
    "gitlab.com",
    "*.gitlab.com",
    "bitbucket.org",
    "*.bitbucket.org",
    "api.anthropic.com",
    "api.openai.com",
)
"""What `{"include": "defaults"}` allows here: the forges and the model APIs agents use.
The service's own preset is not published; this one is the local server's."""


@dataclass(frozen=True)
class Rule:
    domain: str
    action: str
    source: str
    """The rule as the client wrote it (JSON), for refusal messages."""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str


class NetworkPolicy:
    """The compiled rules of one sprite."""

    def __init__(self, rules: Sequence[Mapping[str, Any]] = ()) -> None:
        self.rules: list[Rule] = []
        for raw in rules:
            source = json.dumps(dict(raw), sort_keys=True)
            if raw.get("include") == "defaults":
                self.rules += [Rule(d, "allow", source) for d in DEFAULT_DOMAINS]
            elif isinstance(raw.get("domain"), str) and raw.get("action") in ("allow", "deny"):
                self.rules.append(Rule(str(raw["domain"]).lower(), str(raw["action"]), source))

    def judge(self, host: str) -> Verdict:
        """Whether the policy lets the sprite reach `host` (a name, never an address)."""
        name = normalise(host)
        if not self.rules:
            return Verdict(True, "no network policy: egress is unrestricted")
        exact = [r for r in self.rules if r.domain == name]
        if exact:
            return _decide(exact, name)
        suffixes = [r for r in self.rules if r.domain.startswith("*.")]
        matching = [r for r in suffixes if name.endswith(r.domain[1:])]
        if matching:
            longest = max(len(r.domain) for r in matching)
            return _decide([r for r in matching if len(r.domain) == longest], name)
        star = [r for r in self.rules if r.domain == "*"]
        if star:
            return _decide(star, name)
        return Verdict(False, f"no rule of the network policy allows {name}")


def _decide(rules: list[Rule], name: str) -> Verdict:
    denying = [r for r in rules if r.action == "deny"]
    rule = denying[0] if denying else rules[0]
    verb = "denies" if denying else "allows"
    return Verdict(not denying, f"network policy rule {rule.source} {verb} {name}")


def normalise(host: str) -> str:
    """Lower case, without the root's trailing dot."""
    return host.lower().removesuffix(".")


def ip_literal(host: str) -> Address | None:
    """The address when `host` is an IP literal (IPv6 with or without brackets)."""
    text = host.removeprefix("[").removesuffix("]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def local_name(host: str) -> bool:
    """`localhost` and the names below it, loopback by definition (RFC 6761 §6.3)."""
    name = normalise(host)
    return name == "localhost" or name.endswith(".localhost")


def address_refusal(address: Address, allowed: Iterable[Network]) -> str | None:
    """Why the sprite may not reach `address`, or None when it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allowed):
        return None
    if address.is_global and not address.is_multicast:
        return None
    kind = (
        "a loopback"
        if address.is_loopback
        else "an unspecified"
        if address.is_unspecified
        else "a link-local"
        if address.is_link_local
        else "a multicast"
        if address.is_multicast
        else "a private or reserved"
    )
    return (
        f"{address} is {kind} address: the sprite may not reach private, loopback, "
        "link-local, unspecified or multicast ranges (the server's --egress-allow-private "
        "option lets given ones through)"
    )


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """Addresses or CIDRs (`127.0.0.1`, `10.1.0.0/16`, `::1`); ValueError names a bad one."""
    networks: list[Network] = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address or CIDR") from None
    return tuple(networks)


__all__ = [
    "DEFAULT_DOMAINS",
    "Address",
    "Network",
    "NetworkPolicy",
    "Rule",
    "Verdict",
    "address_refusal",
    "ip_literal",
    "local_name",
    "normalise",
    "parse_networks",
]
