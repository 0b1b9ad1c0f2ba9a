"""The meaning of the eight adjustment types of an ENVIRONMENT_PROPOSAL (pure).

Six become an `EnvironmentStep` of the Sprite's `spec.environment`: a shell command every
Run runs in the sprite before the agent's command. `enable_network_access` becomes an allow
rule of the Sprite's `spec.networkPolicy`; `escalate_to_human` is only a notice. Details
come from a sprite: every value put into a command is checked against a strict pattern and
shell-quoted, and a bad one is refused naming its field.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from lattice_operator.api.v1alpha1 import NetworkPolicy, NetworkRule
from lattice_operator.api.v1alpha1.intent import SuggestedAdjustment
from lattice_operator.api.v1alpha1.sprite import (
    DOMAIN_PATTERN,
    FORGE_DOMAINS,
    EnvironmentStep,
    StepType,
)

DETAILS = "params.environmentChange.suggestedAdjustment.details"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
"""A runtime, package, manager or version: no spaces, no shell characters."""
COMMAND_CHARS = 4096
STEP_TYPES: frozenset[str] = frozenset(
    {
        "runtime_install",
        "runtime_version_adjust",
        "dependency_manager_switch",
        "add_preinstall_step",
        "adjust_smoke_command",
        "add_system_package",
    }
)


class AdjustmentInvalid(ValueError):
    """The adjustment's details cannot be carried out; the message names the field."""


def _word(details: dict[str, Any], key: str, *, required: bool) -> str | None:
    value = details.get(key)
    if value is None or value == "":
        if required:
            raise AdjustmentInvalid(f"{DETAILS}.{key} is required")
        return None
    if not isinstance(value, str) or not NAME.match(value):
        raise AdjustmentInvalid(
            f"{DETAILS}.{key} must be a name of letters, digits and . _ + - "
            f"(at most 128), got {str(value)[:64]!r}"
        )
    return value


def _command(details: dict[str, Any], *, required: bool) -> str | None:
    value = details.get("command")
    if value is None or value == "":
        if required:
            raise AdjustmentInvalid(f"{DETAILS}.command is required")
        return None
    if not isinstance(value, str) or len(value) > COMMAND_CHARS or "\x00" in value:
        raise AdjustmentInvalid(f"{DETAILS}.command must be a string of at most {COMMAND_CHARS}")
    return value


def step_of(name: str, adjustment: SuggestedAdjustment) -> EnvironmentStep:
    """The step an adjustment of one of the six step types adds (AdjustmentInvalid: its
    details cannot make one). A stated `details.command` is the step; without one the
    step is derived: a system package installs through apt unless dpkg knows it already,
    a runtime or dependency manager is checked to be on PATH (at the version, if given)."""
    kind = adjustment.type
    if kind not in STEP_TYPES:
        raise AdjustmentInvalid(f"{kind} is not carried out by a step")
    details = adjustment.details
    recorded: dict[str, str] = {}
    command = _command(details, required=kind in ("add_preinstall_step", "adjust_smoke_command"))
    if kind == "add_system_package":
        package = _word(details, "package", required=command is None)
        version = _word(details, "version", required=False)
        if package is not None:
            recorded["package"] = package
            target = shlex.quote(f"{package}={version}" if version else package)
            command = command or (
                f"dpkg -s {shlex.quote(package)} >/dev/null 2>&1 || "
                f"{{ apt-get update && apt-get install -y {target}; }}"
            )
        if version is not None:
            recorded["version"] = version
    elif kind in ("runtime_install", "runtime_version_adjust"):
        runtime = _word(details, "runtime", required=command is None)
        version = _word(details, "version", required=False)
        if runtime is not None:
            recorded["runtime"] = runtime
            quoted = shlex.quote(runtime)
            check = f"command -v {quoted} >/dev/null"
            if version is not None:
                check += f" && {quoted} --version 2>&1 | grep -qF {shlex.quote(version)}"
            command = command or check
        if version is not None:
            recorded["version"] = version
    elif kind == "dependency_manager_switch":
        manager = _word(details, "manager", required=command is None)
        if manager is not None:
            recorded["manager"] = manager
            command = command or f"command -v {shlex.quote(manager)} >/dev/null"
    assert command is not None
    step_type: StepType = kind  # type: ignore[assignment]  # narrowed by STEP_TYPES
    return EnvironmentStep(name=name, type=step_type, command=command, details=recorded)


def _replaces(old: EnvironmentStep, new: EnvironmentStep) -> bool:
    """Whether `new` takes the place of `old` (an adjustment, not one more step)."""
    if old.name == new.name:
        return True
    if new.type == "adjust_smoke_command":
        return old.type == "adjust_smoke_command"
    if new.type == "dependency_manager_switch":
        return old.type == "dependency_manager_switch"
    if new.type == "runtime_version_adjust" and "runtime" in new.details:
        return old.type in ("runtime_install", "runtime_version_adjust") and old.details.get(
            "runtime"
        ) == new.details.get("runtime")
    return False


def with_step(steps: Sequence[EnvironmentStep], new: EnvironmentStep) -> list[EnvironmentStep]:
    """The environment with `new` added (last), the steps it adjusts removed."""
    return [s for s in steps if not _replaces(s, new)] + [new]


def domains_of(adjustment: SuggestedAdjustment) -> list[str]:
    """The domains an enable_network_access adjustment asks for (`details.domain` or
    `details.domains`); the forges are refused (a sprite never reaches them itself)."""
    details = adjustment.details
    raw = details.get("domains", [details["domain"]] if "domain" in details else None)
    if not isinstance(raw, list) or not raw or len(raw) > 16:
        raise AdjustmentInvalid(f"{DETAILS}.domain (or domains: a list of 1 to 16) is required")
    pattern = re.compile(DOMAIN_PATTERN)
    domains: list[str] = []
    for value in raw:
        if not isinstance(value, str) or len(value) > 253 or not pattern.match(value):
            raise AdjustmentInvalid(f"{DETAILS}.domains: {str(value)[:64]!r} is not a domain")
        if value == "*" or value in FORGE_DOMAINS or _under_forge(value):
            raise AdjustmentInvalid(
                f"{DETAILS}.domains: {value!r} is refused: a sprite never reaches the forges "
                "(or everything) itself"
            )
        domains.append(value)
    return domains


def _under_forge(domain: str) -> bool:
    bare = domain.removeprefix("*.")
    return any(
        bare == f.removeprefix("*.") or bare.endswith(f".{f.removeprefix('*.')}")
        for f in FORGE_DOMAINS
    )


def with_domains(policy: NetworkPolicy | None, domains: Sequence[str]) -> NetworkPolicy | None:
    """The network policy allowing `domains` too; None when it allows them already (unset:
    the operator's default allows all but the forges; `rules: []` allows everything)."""
    if policy is None or not policy.rules:
        return None
    rules = list(policy.rules)
    allowed = {r.domain for r in rules if r.action == "allow"}
    wanted = [d for d in domains if d not in allowed]
    if not wanted:
        return None
    rules = [r for r in rules if r.domain not in wanted]  # an exact deny of it goes
    rules += [NetworkRule(domain=d, action="allow") for d in wanted]
    return NetworkPolicy(rules=rules)


__all__ = [
    "DETAILS",
    "STEP_TYPES",
    "AdjustmentInvalid",
    "domains_of",
    "step_of",
    "with_domains",
    "with_step",
]
